"""#31 §1: the manifests in deploy/kubernetes/ and `history --advise --format kubernetes`.

`kubectl create --dry-run=client` asks an API server for its resource list even so, and the tests
have no cluster: it runs against a stand-in that serves API discovery alone (so no schema:
--validate=false). `kubectl label --local --dry-run=client` decodes the built-in kinds into their
Go types (a field of the wrong type fails), and each manifest's svcdiag wiring is checked here:
probes on the supervisor's port, its grace under the pod's, a kubelet budget that never ends a
start the supervisor still allows, and an SGLang command line svcdiag can read."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from svcdiag.config.service import find_units_dir
from svcdiag.judge.verdict import Verdict
from svcdiag.ops import history as h
from svcdiag.ops.container import from_argv
from svcdiag.output.history import probe_budget

from .conftest import ROOT
from .json_server import Server

MANIFESTS = sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))
KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (scripts/setup rig installs it)")
#: what LeaderWorkerSet puts in a pod's environment, for $(VAR) in its args
LWS_ENV = {"LWS_LEADER_ADDRESS": "deepseek-v3-0.deepseek-v3", "LWS_GROUP_SIZE": "2", "LWS_WORKER_INDEX": "1"}


def decoded(path: Path) -> list[dict]:
    r = subprocess.run([KUBECTL, "label", "--local", "--dry-run=client", "-f", str(path), "svcdiag=checked", "-o", "json"],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    docs, at, dec = [], 0, json.JSONDecoder()
    while r.stdout[at:].strip():  # one JSON object per YAML document
        doc, end = dec.raw_decode(r.stdout, at + len(r.stdout[at:]) - len(r.stdout[at:].lstrip()))
        docs += doc["items"] if doc.get("kind") == "List" else [doc]
        at = end
    return docs


def pod_specs(obj: dict) -> list[dict]:
    """Every pod template's spec in a Deployment, LeaderWorkerSet or RoleBasedGroup."""
    spec = obj.get("spec", {})
    if obj["kind"] == "Deployment":
        return [spec["template"]["spec"]]
    if obj["kind"] == "LeaderWorkerSet":
        t = spec["leaderWorkerTemplate"]
        return [t["leaderTemplate"]["spec"], t["workerTemplate"]["spec"]]
    if obj["kind"] == "RoleBasedGroup":
        return [r["standalonePattern"]["template"]["spec"] for r in spec["roles"]]
    return []


#: what a cluster's API discovery would list for the manifests' kinds (LeaderWorkerSet and RBG as their CRDs install them)
DISCOVERY = {"v1": [("configmaps", "ConfigMap"), ("pods", "Pod")], "apps/v1": [("deployments", "Deployment")],
             "leaderworkerset.x-k8s.io/v1": [("leaderworkersets", "LeaderWorkerSet")],
             "workloads.x-k8s.io/v1alpha2": [("rolebasedgroups", "RoleBasedGroup")]}


@pytest.fixture(scope="module")
def api_discovery():
    """An API server's discovery endpoints and nothing else, on loopback: what `kubectl create
    --dry-run=client` asks before it maps a kind (schemas are not served: --validate=false)."""
    groups = [gv for gv in DISCOVERY if "/" in gv]
    routes = {
        "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
        "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": g.split("/")[0], "versions": [{"groupVersion": g, "version": g.split("/")[1]}],
             "preferredVersion": {"groupVersion": g, "version": g.split("/")[1]}} for g in groups]},
        **{"/api/v1" if gv == "v1" else f"/apis/{gv}": {
            "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": [
                {"name": n, "singularName": "", "namespaced": True, "kind": k, "verbs": ["create", "get"]}
                for n, k in kinds]} for gv, kinds in DISCOVERY.items()},
    }
    with Server({path: [(200, body)] for path, body in routes.items()}) as server:
        yield f"http://127.0.0.1:{server.port}"


@needs_kubectl
@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_each_manifest_passes_kubectl_create_dry_run(path: Path, api_discovery: str, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"  # none of the machine's own clusters, nor its discovery cache
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    r = subprocess.run([KUBECTL, "--server", api_discovery, "--kubeconfig", str(kubeconfig),
                        "--cache-dir", str(tmp_path / "cache"), "create",
                        "--dry-run=client", "--validate=false", "-f", str(path), "-o", "name"],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.split()) == len(decoded(path))  # every object of the file


def test_there_are_the_three_manifests_the_docs_walk_through() -> None:
    assert [p.name for p in MANIFESTS] == ["deployment.yaml", "leaderworkerset.yaml", "rbg.yaml"]


@needs_kubectl
@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_each_manifest_decodes_and_wires_the_supervisors_probes(path: Path, tmp_path: Path) -> None:
    objs = decoded(path)
    mounted = {}
    for obj in objs:
        if obj["kind"] == "ConfigMap":
            for key, text in obj["data"].items():
                mounted[key] = tmp_path / key
                mounted[key].write_text(text)
    specs = [s for obj in objs for s in pod_specs(obj)]
    assert specs
    for spec in specs:
        (c,) = spec["containers"]
        assert c["command"] == ["svcdiag", "supervise", "--"], c["name"]
        env = {e["name"]: e["value"] for e in c.get("env", [])}
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        assert ports["probes"] == int(env["SVCDIAG_PROBE_PORT"])
        probes = {k: c[k] for k in ("startupProbe", "readinessProbe", "livenessProbe") if k in c}
        assert probes["startupProbe"]["httpGet"] == {"path": "/startupz", "port": "probes"}
        assert probes["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "probes"}
        if "readinessProbe" in probes:
            assert probes["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "probes"}
        assert all(p.get("timeoutSeconds", 1) >= 2 for k, p in probes.items() if k != "startupProbe")
        assert c.get("terminationMessagePolicy") == "File"
        assert float(env["SVCDIAG_GRACE_S"]) < spec["terminationGracePeriodSeconds"]
        # the supervisor reads the command line as the pod will run it ($(VAR) expanded by the kubelet)
        argv = [re.sub(r"\$\((\w+)\)", lambda m: LWS_ENV[m.group(1)], a) for a in c["args"]]
        if "SVCDIAG_CONFIG" in env:
            env["SVCDIAG_CONFIG"] = str(mounted[Path(env["SVCDIAG_CONFIG"]).name])
        cfg = from_argv(argv, env)
        assert cfg.name == env["SVCDIAG_NAME"] and cfg.model_path.rsplit("/", 1)[-1] in " ".join(c["args"])
        sp = probes["startupProbe"]
        assert sp["periodSeconds"] * sp["failureThreshold"] >= probe_budget(cfg.timeout), c["name"]


def verdict(weights: float) -> Verdict:
    return Verdict(ts=time.time(), verdict="healthy", phase="ready", cause=None, message="ready",
                   figures={"kv_tokens": 94126, "max_running_requests": 4, "startup_s": weights + 20,
                            "sglang_version": "0.5.23"},
                   phase_seconds={"starting": 5.0, "loading_weights": weights, "kv_cache": 1.0},
                   unit="x.service", invocation=f"inv{weights}")


def test_advise_as_kubernetes_gives_the_pod_the_deadlines_the_unit_would_learn(cli, units: Path, tmp_path: Path) -> None:
    cfg = find_units_dir(str(units)).load("demo-smoke")
    for w in (40.0, 42.0, 44.0):
        h.record_start(cfg, verdict(w), "up", state=str(tmp_path))
    r = cli("history", "demo-smoke", "--advise", "--format", "kubernetes", "--probe-port", "9000",
            "--state-dir", str(tmp_path))
    assert r.exit_code == 0, r.output
    text = r.output
    assert text.startswith("# demo-smoke: 3 healthy start(s) recorded\n")
    env = dict(re.findall(r'- name: (\w+)\n    value: "([^"]+)"', text))
    assert env["SVCDIAG_PROBE_PORT"] == "9000" and env["SVCDIAG_TIMEOUT_LOADING_WEIGHTS"] == "88"
    learned = h.with_learned(cfg, h.load_usual(cfg, None, str(tmp_path))).timeout
    pod = from_argv(["sglang", "serve", "--model-path", "/m"], env)
    assert pod.timeout == learned  # the pod's supervisor enforces what the unit's would
    threshold = int(re.search(r"failureThreshold: (\d+)", text).group(1))
    assert threshold == math.ceil(probe_budget(learned) / 10)
    if KUBECTL:  # the blocks, pasted into a container, make a valid pod
        body = "\n".join("    " + line for line in text.splitlines())
        pod_yaml = tmp_path / "pod.yaml"
        pod_yaml.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n"
                            f"  - name: sglang\n    image: sglang\n{body}\n")
        (obj,) = decoded(pod_yaml)
        assert obj["spec"]["containers"][0]["startupProbe"]["httpGet"]["path"] == "/startupz"
    assert "--format kubernetes: only with --advise" in cli("history", "--format", "kubernetes").output
