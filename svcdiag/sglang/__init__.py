"""Everything that knows SGLang: its start-up log grammar, its flags, model shapes, and
the one memory model (how SGLang sizes the KV pool, the Mamba cache and max_running).

Pure where it can be (the grammar and the memory model do no I/O). May import `config`
and the base modules; never `judge`, `systemd`, `output`, `ops` or `cli`.
"""
