"""The model and its checkpoint: not found, not supported by the release, or broken on disk."""

from __future__ import annotations

from svcdiag.sglang import lazy_re
from svcdiag.sglang.failures._model import Cause, FailureClass, Family, Raised, said

#: the families whose rows this module files
FAMILIES = (Family.MODEL,)


#: where a model_not_found names the path or id it could not open (the hub's URL, the id, the folder)
_NAMED_PATH = said(r"huggingface\.co/(?:api/models/)?(?!docs/)(?P<hub_id>[\w.-]+/[\w-]+(?:\.[\w-]+)*)"
                    r"|path_or_model_id: '(?P<path_id>[^']+)'|Repo id must [^:]*: '(?P<repo_id>[^']+)'"
                    r"|No such file or directory: '(?P<file>[^']+)'")


ROWS: tuple[FailureClass, ...] = (
    FailureClass(Cause.UNSUPPORTED_MODEL, priority=80, line=lazy_re.compile(
        r"Transformers does not recognize this architecture|Model architectures? \[.*\] (?:are|is) not supported"
        r"|Unrecognized configuration class|Unrecognized model in|Unrecognized (?:image )?processor in"
        r"|model type `?[\w.-]+`? but Transformers does not"
        r"|is not supported for now|failed to be inspected|did not match any variant of untagged enum (?:ModelWrapper|Py\w*Wrapper)"
        r"|Tokenizer class \w+ does not exist or is not currently imported"
        r"|Unknown quantization method"  # the checkpoint's quant_method, which this release does not know
        r"|GGUF model with architecture \w+ is not supported"  # transformers' GGUF reader, older than the model
        # speculative decoding's target hooks, missing from this release's class for the target model
        r"|object has no attribute '(?:capture_aux_hidden_states|set_eagle3_layers_to_capture|get_embed_and_head)'"
        # SGLang's own words: the architecture not in its registry, transformers too old for it, a GGUF model_type
        r"|Unsupported architectures: |Transformers version \S+ is not supported for model"
        r"|is not a registered model in the Transformers library|Unknown gguf model_type"
        r"|has no SGl?ang implementation and the Transformers implementation is not compatible"
        # a feature the flags ask for that this model's class does not have
        r"|\b[Mm]odel '?\S+?'? does not support |(?:Pipeline Parallel|PP) is not compatible with (?:this model|MTP models)"),
        # transformers' CONFIG_MAPPING (or a class mapping) lacks it: `KeyError: 'qwen2'`
        raised=(Raised(lazy_re.compile(r'/(?:configuration_auto|auto_factory)\.py"'), window=2,
                       final=lazy_re.compile(r"^KeyError")),),
        doc="`ValueError: Model architectures ['X'] are not supported for now.`, `… has model type "
            "`qwen3_next` but Transformers does not recognize this architecture …`; tokenizer files newer"
            " than the installed tokenizers (`Exception: data did not match any variant of untagged enum "
            "ModelWrapper …`); `ValueError: Unknown quantization method: X. Must be one of […]` (the "
            "checkpoint's quant_method); `Unrecognized image processor in …` (transformers older than the"
            " VLM); `ValueError: GGUF model with architecture qwen3moe is not supported yet.` "
            "(transformers' GGUF reader, `--load-format gguf`); a target model class this release cannot "
            "speculate from (`… object has no attribute 'capture_aux_hidden_states'`, "
            "`set_eagle3_layers_to_capture`, `get_embed_and_head`); SGLang's own `Unsupported architectures: X. "
            "Supported list: …`, `X has no SGlang implementation and the Transformers implementation is not "
            "compatible …`, `Transformers version … is not supported for model …`, `Unknown gguf model_type`; a "
            "feature the model's class lacks (`Model X does not support BitsAndBytes quantization yet.`, `Pipeline "
            "Parallel is not compatible with this model.`)",
        explain=("This SGLang release has no implementation of the model's architecture: {message}",
                 "Upgrade SGLang to a release that lists the architecture, or check config.json's `architectures`.")),
    FailureClass(Cause.MODEL_NOT_FOUND, priority=90, read=(_NAMED_PATH,), line=lazy_re.compile(
        r"Incorrect path_or_model_id|HFValidationError|RepositoryNotFoundError|Repository Not Found"
        r"|Repo id must (?:be in the form|use alphanumeric chars)"  # a --model-path neither a folder here nor a hub id
        r"|is not a local folder and is not a valid model identifier|gated repo|Cannot access gated repo"
        r"|401 Client Error|You must have access to it and be authenticated|GatedRepoError"
        r"|does not appear to have a file named |No such file or directory: .*config\.json"
        r"|LocalEntryNotFoundError|couldn't find (?:it|them) in the cached files|outgoing traffic has been disabled"
        r"|OfflineModeIsEnabled"  # HF_HUB_OFFLINE=1 and a call that must reach the hub
        r"|Can't load tokenizer for|Can't load the configuration of"
        r"|Can't load (?:image processor|processor|feature extractor) for"  # a VLM saved without its processor files
        r"|you are not in the authorized list|Invalid user token|Invalid credentials in Authorization header"
        r"|(?:Entry|Revision) Not Found for url|EntryNotFoundError|RevisionNotFoundError"
        # the folder is there, its weights (or the files the checkpoint names) are not
        r"|Cannot find any model weights with|No model weights found in|Could not find checkpoint files"
        r"|shard file\(s\) missing from|Cannot find the config file for"),
        doc="`OSError: Incorrect path_or_model_id: '/models/x'`, "
            "`huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error …`, `OSError: You are "
            "trying to access a gated repo.`; offline with the model not cached "
            "(`LocalEntryNotFoundError`, `… couldn't find them in the cached files`, "
            "`OfflineModeIsEnabled: Cannot reach https://huggingface.co/…: offline mode is enabled`); "
            "`Can't load tokenizer for …`; a VLM's `Can't load image processor for …` (no "
            "preprocessor_config.json); a `--lora-paths` folder that is not there (`HFValidationError: "
            "Repo id must be …: '/data/loras/x'`: the diagnosis names that path, not model_path); the hub's "
            "own words pasted alone (`Cannot access gated repo for url …`, `… you are not in the authorized list`, "
            "`Invalid user token`); a folder without its weights (`Cannot find any model weights with …`, `No "
            "model weights found in …`, `Could not find checkpoint files …`), shards its index names (`… shard "
            "file(s) missing from … (incomplete download?)`) or its quantization config (`Cannot find the config "
            "file for awq`)",
        explain=("SGLang cannot open model_path {what}: it is neither a folder on this host nor a repo id it can reach.",
                 "`ls {path}` on the GPU host; a model in /dev/shm is gone after a reboot.")),
    FailureClass(Cause.BAD_CHECKPOINT, priority=210, line=lazy_re.compile(
        r"SafetensorError|Error while deserializing header|HeaderTooLarge|MetadataIncompleteBuffer"
        r"|incomplete metadata, file not fully covered|PytorchStreamReader failed|invalid load key"
        r"|Attempted to load weight \(|is not a valid JSON file"
        r"|checksum mismatch for presharded checkpoint"),
        # a tensor the model class does not have (a KeyError in its load_weights), or of another shape than this release's
        # class (and tp) expect
        raised=(Raised(lazy_re.compile(r" in load_weights$"), window=3, final=lazy_re.compile(r"^KeyError")),
                Raised(lazy_re.compile(r" in (?:weight_loader|load_weights)$"), window=4,
                       final=lazy_re.compile(r"must match the size of tensor"))),
        doc="a weights file that cannot be read (`safetensors_rust.SafetensorError: Error while "
            "deserializing header: MetadataIncompleteBuffer`, a cut download) or a tensor the model class"
            " does not know (a `KeyError` raised in a model's `load_weights`) or of another shape "
            "(`AssertionError: Attempted to load weight (…) into parameter (…)`: after the target loaded,"
            " a speculative draft made for another target)",
        explain=("A weights file is unreadable: {message}",
                 "Most often a download that stopped half way (the file is shorter than its header says). Compare the "
                 "file sizes with the hub's, delete the broken shard and download it again "
                 "(`huggingface-cli download --force-download`).")),
    FailureClass(Cause.UNSUPPORTED_MODEL, "feature", priority=600,
                 said=said(r"\A.*(?:\b[Mm]odel '?\S+?'? does not support |is not compatible with (?:this model|MTP))"),
                 doc="ValueError: Model Qwen3ForCausalLM does not support BitsAndBytes quantization yet.",
                 explain=("This SGLang release serves the model, but not with what the flags ask of it: {message}",
                          "Serve it without that feature (the flag or quantization named), or with a release that "
                          "supports it for this model.")),
    FailureClass(Cause.UNSUPPORTED_MODEL, "tokenizer_too_old", priority=610,
                 said=said(r"untagged enum|Tokenizer class \w+ does not exist"),
                 doc="Exception: data did not match any variant of untagged enum ModelWrapper at line 1 column 1",
                 explain=("The installed tokenizers/transformers cannot read this model's tokenizer files: they were "
                          "written by a newer release.",
                          "Upgrade them in the unit's interpreter (`pip install -U tokenizers transformers`), within what "
                          "the SGLang release pins.")),
    FailureClass(Cause.UNSUPPORTED_MODEL, "speculative_target", priority=620,
                 said=said(r"object has no attribute '(?P<hook>capture_aux_hidden_states|set_eagle3_layers_to_capture"
                            r"|get_embed_and_head)'"),
                 doc="AttributeError: 'Gemma3ForCausalLM' object has no attribute 'set_eagle3_layers_to_capture'",
                 explain=("This SGLang release's {model_type} cannot be the target of this speculative algorithm: it "
                          "lacks {hook}, which the draft needs from its target.",
                          "Upgrade SGLang to a release whose model class supports it (EAGLE3 needs the target to capture "
                          "auxiliary hidden states), or serve without speculative decoding / with another algorithm.")),
    FailureClass(Cause.UNSUPPORTED_MODEL, "gguf_architecture", priority=630,
                 said=said(r"GGUF model with architecture (?P<arch>\w+) is not supported"),
                 doc="ValueError: GGUF model with architecture qwen3moe is not supported yet.",
                 explain=("The installed transformers cannot read a GGUF file of architecture '{arch}': its GGUF reader "
                          "(which SGLang uses for the config and tokenizer) is older than the model.",
                          "Upgrade transformers and gguf in the unit's interpreter, within what the SGLang release pins; or "
                          "serve the model's safetensors release (with a --quantization of its own) instead of the .gguf.")),
    FailureClass(Cause.UNSUPPORTED_MODEL, "quantization_method", priority=640,
                 said=said(r"Unknown quantization method: (?P<method>[\w-]+)"),
                 doc="ValueError: Unknown quantization method: mxfp4. Must be one of ['fp8', 'awq']",
                 explain=("The checkpoint's quantization method '{method}' (quantization_config in config.json) is not "
                          "one this SGLang release implements.",
                          "Upgrade SGLang to a release that lists it, or serve a checkpoint quantized with a method this "
                          "one lists (the error names them).")),
    FailureClass(Cause.UNSUPPORTED_MODEL, "transformers_too_old", priority=650,
                 said=said(r"Transformers does not recognize|Unrecognized|model type|\AKeyError"),
                 doc="ValueError: The checkpoint you are trying to load has model type `qwen3_next` but Transformers "
                     "does not recognize this architecture.",
                 explain=("The installed transformers does not know this model's `model_type`: the model is newer than "
                          "the library.",
                          "Upgrade transformers in the unit's interpreter (`pip install -U transformers`), or the SGLang "
                          "release that ships the newer one.")),
    FailureClass(Cause.BAD_CHECKPOINT, "presharded_checksum", priority=820, said=said(r"\A.*checksum mismatch for presharded"),
                 doc="RuntimeError: Rank-3 checksum mismatch for presharded checkpoint at /ckpt/rank3: expected ab12, "
                     "got cd34.",
                 explain=("A rank's presharded checkpoint files are not what was dumped: {message}",
                          "The files are corrupted or from another dump: copy them again or re-dump the presharded "
                          "checkpoint; skipping the check (as the message says) loads them as they are.")),
    FailureClass(Cause.BAD_CHECKPOINT, "shape_mismatch", priority=830, said=said(r"\A.*Attempted to load weight"),
                 doc="AssertionError: Attempted to load weight (torch.Size([4096])) into parameter (torch.Size([5120]))"),
    FailureClass(Cause.BAD_CHECKPOINT, "unknown_tensor", priority=840, said=said(r"\AKeyError"),
                 doc="KeyError: 'model.layers.0.mlp.experts.w2_weight'",
                 explain=("The checkpoint has a tensor the model class does not know: {message}",
                          "The weights do not match the architecture SGLang builds from config.json: a quantized or "
                          "merged checkpoint with another layout, a config.json from a different model, or a checkpoint "
                          "newer than this SGLang release. Check `architectures` and `quantization_config` in "
                          "config.json.")),
    FailureClass(Cause.MODEL_NOT_FOUND, "no_weights", priority=1080,
                 said=said(r"\A.*(?:Cannot find any model weights with|No model weights found in"
                            r"|Could not find checkpoint files)"),
                 doc="RuntimeError: Cannot find any model weights with `/models/Qwen3-8B`",
                 explain=("SGLang found {what} but no weights in it that it can load: {message}",
                          "The folder has no *.safetensors (or the *.bin / *.pt files --load-format asks for): a copy "
                          "that left them out, a path one level off, or a repo snapshot with the config only. `ls {path}`;"
                          " download the weights again (`huggingface-cli download`), or give the --load-format they are "
                          "in.")),
    FailureClass(Cause.MODEL_NOT_FOUND, "missing_shards", priority=1090, said=said(r"\A.*shard file\(s\) missing from"),
                 doc="ValueError: model.safetensors.index.json references 2 shard file(s) missing from /models/x "
                     "(incomplete download?): ['model-00003-of-00004.safetensors', …]",
                 explain=("The checkpoint's index names weight shards its folder does not have: {message}",
                          "A download or copy that stopped part way: download the model again (`huggingface-cli "
                          "download` fetches only what is missing) or copy the shards it names.")),
    FailureClass(Cause.MODEL_NOT_FOUND, "no_quant_config", priority=1100,
                 said=said(r"\A.*Cannot find the config file for (?P<quant>\S+)"),
                 doc="ValueError: Cannot find the config file for awq",
                 explain=("The checkpoint is read as {quant}-quantized, but {what} has no quantization config file for "
                          "it (quant_config.json, or quantization_config in config.json): {message}",
                          "Copy the quantization config from the quantized model's repo next to the weights, or leave "
                          "quantization unset if the checkpoint is not {quant}.")),
    FailureClass(Cause.MODEL_NOT_FOUND, "repo_not_found", priority=1110, said=said(r"RepositoryNotFoundError|Repository Not Found"),
                 doc="huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. Repository Not Found for url",
                 explain=("The model hub has no repo {what} (or hides it: a private repo answers the same, HTTP 401).",
                          "Check the spelling against the hub page, or download it and point model_path at the "
                          "folder.")),
    FailureClass(Cause.MODEL_NOT_FOUND, "offline_not_cached", priority=1120,
                 said=said(r"LocalEntryNotFoundError|in the cached files|outgoing traffic has been disabled"
                            r"|OfflineModeIsEnabled"),
                 doc="huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an appropriate cached snapshot",
                 explain=("SGLang looked for {what} in the Hugging Face cache only (HF_HUB_OFFLINE=1 or "
                          "TRANSFORMERS_OFFLINE=1, or no network) and it is not there.",
                          "Download it once where the hub is reachable (`huggingface-cli download`) into the HF_HOME the "
                          "unit uses, or point model_path at a local folder; a sandboxed unit sees only the cache its "
                          "paths allow.")),
    FailureClass(Cause.MODEL_NOT_FOUND, "no_processor", priority=1130,
                 said=said(r"Can't load (?:image processor|processor|feature extractor)"),
                 doc="OSError: Can't load image processor for '/models/my-vlm'.",
                 explain=("SGLang found the model but not its multimodal processor for {what}: {message}",
                          "A fine-tuned VLM saved without preprocessor_config.json (and its chat_template/tokenizer "
                          "files) cannot take images: copy those files from the base model's repo next to the weights.")),
    FailureClass(Cause.MODEL_NOT_FOUND, "missing_file", priority=1140,
                 said=said(r"(?P<folder>\S+) does not appear to have a file named (?P<missing>[^.\s]+(?:\.\w+)?)"),
                 doc="OSError: /models/Qwen3-8B does not appear to have a file named tokenizer_config.json.",
                 explain=("{folder} is there but has no {missing}: an incomplete copy or download of the model.",
                          "Compare the folder with the model's repo (`ls {folder}`) and copy the missing files next to "
                          "the weights, or download it again.")),
    FailureClass(Cause.MODEL_NOT_FOUND, "no_tokenizer", priority=1150, said=said(r"Can't load tokenizer"),
                 doc="OSError: Can't load tokenizer for '/models/x'.",
                 explain=("SGLang found the model but no tokenizer files for {what}: {message}",
                          "Copy tokenizer.json/tokenizer_config.json next to the weights, or set tokenizer_path to where "
                          "they are.")),
    FailureClass(Cause.MODEL_NOT_FOUND, "gated", priority=1160, said=said(r"gated repo|401 Client Error|authenticated|GatedRepoError"),
                 doc="OSError: You are trying to access a gated repo.",
                 explain=("The model hub refused {what}: it is a gated (or private) repo and this server has no token "
                          "that may read it (HTTP 401).",
                          "Accept the model's licence on its hub page with the account whose token the server uses, then "
                          "give the unit that token as a secret (`[secrets] HF_TOKEN`, docs/security.md), or download the "
                          "model and point model_path at the folder.")),
    # a layer the checkpoint's quantization config gives no method (`get_quant_method` returned None: AWQ or GPTQ
    # of a MoE model's fused experts before moe_wna16, 0.4.0's FusedMoE), and SGLang's bare assertion on it
    FailureClass(Cause.UNSUPPORTED_MODEL, "quantized_layer", priority=1400,
                 line=lazy_re.compile(r"^assert self\.quant_method is not None"),
                 said=said(r"assert self\.quant_method is not None"),
                 doc="AssertionError (at `assert self.quant_method is not None` in fused_moe_triton/layer.py's "
                     "FusedMoE.__init__)",
                 explain=("The checkpoint's quantization has no method for one of this model's layers in this SGLang "
                          "release (its quantization config gave the layer none, and SGLang asserts on it): {message}",
                          "Most often an AWQ or GPTQ checkpoint of a MoE model, whose fused experts the release cannot "
                          "run in that format: use a newer release whose quantization covers MoE layers (its "
                          "`--quantization moe_wna16` for AWQ/GPTQ MoE), or a checkpoint quantized in a format it runs for "
                          "MoE (fp8, or the unquantized model).")),
)
