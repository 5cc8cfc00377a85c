"""The stand-in's scenarios: the GPU host's condition and the way a start goes wrong.

Config validation checks `simulate =` against config.service.SIM_SCENARIOS, which names these.
"""

from __future__ import annotations

from dataclasses import dataclass

from svcdiag.config.service import SIM_SCENARIOS


@dataclass(frozen=True)
class Scenario:
    """A simulated start: the model, the GPU and what goes wrong."""

    summary: str
    dense: bool = False
    #: what goes wrong, and where (None: a healthy start)
    fault: str | None = None
    #: free memory per GPU before loading (GB); None: an idle 96 GB RTX PRO 6000 (model.IDLE_GPU_FREE_GB)
    gpu_free_gb: float | None = None
    #: solve the free memory so the KV pool comes out at exactly this many tokens
    kv_tokens_target: int | None = None
    #: nominal seconds of the weight load (scaled by --time-scale)
    weight_load_s: float = 41.9
    #: what /get_server_info reports, when it lies (the HTTP cross-check's test)
    server_info_tokens_delta: int = 0
    #: fault "stops_serving": nominal seconds the server answers after ready, before /ready and /health* say 503;
    #: fault "loaded_serving": before /health* turn slow (LOADED_HEALTH_S) while decode batches go on;
    #: fault "killed_after_ready": before the scheduler is SIGKILLed
    serving_s: float = 40.0
    #: nominal seconds of DeepGEMM's JIT pre-compile at the start of CUDA-graph capture (a first start on a host)
    precompile_s: float = 0.0
    #: lines of chatter (a warning repeated) printed in one burst halfway through the weight load
    chatter_lines: int = 0


SCENARIOS: dict[str, Scenario] = {
    "healthy-hybrid-dflash": Scenario("Qwen3.6-27B hybrid + DFlash draft, starts in ~2 min (the seed's smoke figures)"),
    "healthy-dense": Scenario("a dense model without speculation, starts cleanly", dense=True),
    "slow-start": Scenario("healthy, but weights load from slow storage: a ~2.5-minute start", weight_load_s=100.6),
    "max-running-zero": Scenario(
        "the seed's failure: 11,893 KV tokens for a 32,768 context, `max_running_request is zero`",
        fault="max_running_zero", kv_tokens_target=11893),
    "not-enough-memory": Scenario("weights leave no room for the KV cache under mem_fraction_static",
                                  fault="not_enough_memory", gpu_free_gb=71.5),
    "cuda-oom": Scenario("CUDA out of memory while capturing CUDA graphs", fault="cuda_oom"),
    "segfault": Scenario("SIGSEGV in the middle of the weight load (nothing printed about it)", fault="segfault"),
    "oom-kill": Scenario("SIGKILL mid-load, as the kernel's OOM killer sends it", fault="sigkill"),
    "exit-early": Scenario("exits with status 1 before the KV cache, without a word", fault="exit_early"),
    "hang": Scenario("silent hang in the weight load: no line, no exit", fault="hang"),
    "port-in-use": Scenario("another server already listens on --port: uvicorn cannot bind", fault="port_in_use"),
    "model-missing": Scenario("--model-path does not exist", fault="model_missing"),
    "nccl-error": Scenario("NCCL fails while initialising torch distributed", fault="nccl_error"),
    "http-mismatch": Scenario("healthy log, but /get_server_info disagrees with the logged KV pool",
                              server_info_tokens_delta=-4096),
    "deepgemm-first-start": Scenario("healthy, but a first start on this host compiles DeepGEMM kernels for "
                                     "~15 min while capturing CUDA graphs (as DeepSeek-V3 in FP8 does)",
                                     dense=True, precompile_s=900.0),
    "stops-serving": Scenario("starts healthy, then stops serving without a word: /ready and /health answer 503 "
                              "(a wedged scheduler; the notify watchdog's test)", fault="stops_serving"),
    "chatty": Scenario("healthy, but prints 30,000 warnings mid-load: more than journald's default rate limit keeps",
                       chatter_lines=30_000),
    "chatty-cuda-oom": Scenario("30,000 warnings mid-load, then CUDA out of memory while capturing CUDA graphs",
                                fault="cuda_oom", chatter_lines=30_000),
    "chatty-hang": Scenario("30,000 warnings mid-load, then a silent hang capturing CUDA graphs",
                            fault="hang_in_graphs", chatter_lines=30_000),
    "loaded-serving": Scenario("starts healthy, then serves under load: /health answers only after 30 s while "
                               "decode batches are printed every second (busy, not wedged: the serving watch's test)",
                               fault="loaded_serving"),
    "killed-while-serving": Scenario("starts healthy, then a scheduler is SIGKILLed while serving, as the kernel's OOM "
                                     "killer does (40 s later, unscaled): from the ready line on, /ready and /health "
                                     "answer 503 (the first batch never comes back); the launcher says its child's exit "
                                     "code 9 and kills itself (a post-ready incident `killed`: live and replay agree)",
                                     fault="killed_after_ready"),
}
#: fault "loaded_serving": nominal seconds /health and /health_generate take once the server is loaded
LOADED_HEALTH_S = 30.0

if tuple(SCENARIOS) != SIM_SCENARIOS:  # the config's list names exactly these, in this order
    raise ImportError(f"svcdiag.config.service.SIM_SCENARIOS differs from the stand-in's: {tuple(SCENARIOS)}")
