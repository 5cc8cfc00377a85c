set -x
S=.venv/bin/svcdiag
$S --units units up demo-smoke --wait-ready --json --textfile .scratch/svc.prom | tail -2
echo rc=$?
$S --units units events --unit demo-smoke --json | python3 -c 'import sys,json; [print(json.loads(l)["event"], json.loads(l).get("milestone"), json.loads(l).get("verdict")) for l in sys.stdin]'
$S --units units events
journalctl -o json SVCDIAG_EVENT=verdict --no-pager | head -1 | python3 -m json.tool | grep -E 'SVCDIAG|MESSAGE|PRIORITY'
cat .scratch/svc.prom
$S --units units wait demo-smoke --json | tail -1
journalctl SVCDIAG_EVENT=verdict --no-pager
$S --units units events --since -1min | tail -3
$S --units units events --since bogus; echo rc=$?
