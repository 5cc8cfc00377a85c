"""The host the units run on: getting it ready, and what it has and keeps.

`setup` prepares it (groups, users, folders, polkit), `adopt` turns what an operator already runs
into configs (`import`, `new`); `sglang_version` says which SGLang release a unit's interpreter
has and `check` its flags against that release; `preflight` reads the model directories and the
GPU figure (`gpumem`), `gpu_hygiene` names who else holds a GPU's memory; `history` is the start
history in the state directory. The bottom room: imports no other.
"""
