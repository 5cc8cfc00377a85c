"""Configs: the TOML files in a units folder, validated and merged into ServiceConfig.

Owns: the config schema, `extends`, the units folder, the phase list and its default
deadlines, config diffs. Imports nothing of svcdiag but `errors`: every layer above reads
configs, so this one must not know about them.
"""
