"""Where records go: the versioned event schema, the publisher that fans a record out to
its sinks, the terminal report and live line, the Prometheus textfile.

Formats and writes what it is given; decides nothing (diagnosis happens before a verdict
reaches it). May import `judge`, `sglang`, `config`; never `systemd`, `ops` or `cli`.
"""
