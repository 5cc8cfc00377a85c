"""Use cases, in rooms named for what an operator is doing (docs/architecture.md draws them):

- `serve`: a unit under systemd: `start` (up, wait), `follow`, `service` (down, status, logs),
  `nodes`, `board` (top), `supervise` (a notify unit's main process) and what its readers share;
- `offline`: a start read after the fact: `replay`, `bundle`, `bundle_read`, `conclude`;
- `fleet`: many starts: `campaign`, `tune` (`tune_search`, `tune_model`), `baseline`;
- `host`: the machine: `setup`, `adopt` (import, new), `sglang_version`, `check`, `preflight`,
  `gpumem`, `gpu_hygiene`, `history`;
- `containers`: no systemd: `container` (a pod's PID 1), `probes`.

A room imports only the rooms below it: fleet | containers > serve > offline > host
(pyproject.toml's import-linter contracts). Each use case takes configs and a publisher, drives
`systemd`, `judge` and `output`, and returns a typed result; none prints on its own or exits the
process: `cli` maps results to exit codes. The packages import nothing: `svcdiag --version` and
`list` pay for no room they do not use.
"""
