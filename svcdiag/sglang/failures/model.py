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
        doc="this SGLang release (or its transformers) does not know the model's architecture"),
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
        doc="the model path or hub repo id names no model, or one this host may not read"),
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
        doc="a weights file that cannot be read, or a tensor whose shape the model does not expect"),
    FailureClass(Cause.UNSUPPORTED_MODEL, "feature", priority=600,
                 said=said(r"\A.*(?:\b[Mm]odel '?\S+?'? does not support |is not compatible with (?:this model|MTP))"),
                 doc="ValueError: Model Qwen3ForCausalLM does not support BitsAndBytes quantization yet."),
    FailureClass(Cause.UNSUPPORTED_MODEL, "tokenizer_too_old", priority=610,
                 said=said(r"untagged enum|Tokenizer class \w+ does not exist"),
                 doc="Exception: data did not match any variant of untagged enum ModelWrapper at line 1 column 1"),
    FailureClass(Cause.UNSUPPORTED_MODEL, "speculative_target", priority=620,
                 said=said(r"object has no attribute '(?P<hook>capture_aux_hidden_states|set_eagle3_layers_to_capture"
                            r"|get_embed_and_head)'"),
                 doc="AttributeError: 'Gemma3ForCausalLM' object has no attribute 'set_eagle3_layers_to_capture'"),
    FailureClass(Cause.UNSUPPORTED_MODEL, "gguf_architecture", priority=630,
                 said=said(r"GGUF model with architecture (?P<arch>\w+) is not supported"),
                 doc="ValueError: GGUF model with architecture qwen3moe is not supported yet."),
    FailureClass(Cause.UNSUPPORTED_MODEL, "quantization_method", priority=640,
                 said=said(r"Unknown quantization method: (?P<method>[\w-]+)"),
                 doc="ValueError: Unknown quantization method: mxfp4. Must be one of ['fp8', 'awq']"),
    FailureClass(Cause.UNSUPPORTED_MODEL, "transformers_too_old", priority=650,
                 said=said(r"Transformers does not recognize|Unrecognized|model type|\AKeyError"),
                 doc="ValueError: The checkpoint you are trying to load has model type `qwen3_next` but Transformers does not …"),
    FailureClass(Cause.BAD_CHECKPOINT, "presharded_checksum", priority=820, said=said(r"\A.*checksum mismatch for presharded"),
                 doc="RuntimeError: Rank-3 checksum mismatch for presharded checkpoint at /ckpt/rank3: expected ab12, got cd34."),
    FailureClass(Cause.BAD_CHECKPOINT, "shape_mismatch", priority=830, said=said(r"\A.*Attempted to load weight"),
                 doc="AssertionError: Attempted to load weight (torch.Size([4096])) into parameter (torch.Size([5120]))"),
    FailureClass(Cause.BAD_CHECKPOINT, "unknown_tensor", priority=840, said=said(r"\AKeyError"),
                 doc="KeyError: 'model.layers.0.mlp.experts.w2_weight'"),
    FailureClass(Cause.MODEL_NOT_FOUND, "no_weights", priority=1080,
                 said=said(r"\A.*(?:Cannot find any model weights with|No model weights found in"
                            r"|Could not find checkpoint files)"),
                 doc="RuntimeError: Cannot find any model weights with `/models/Qwen3-8B`"),
    FailureClass(Cause.MODEL_NOT_FOUND, "missing_shards", priority=1090, said=said(r"\A.*shard file\(s\) missing from"),
                 doc="ValueError: model.safetensors.index.json references 2 shard file(s) missing from /models/x (incomplete …"),
    FailureClass(Cause.MODEL_NOT_FOUND, "no_quant_config", priority=1100,
                 said=said(r"\A.*Cannot find the config file for (?P<quant>\S+)"),
                 doc="ValueError: Cannot find the config file for awq"),
    FailureClass(Cause.MODEL_NOT_FOUND, "repo_not_found", priority=1110, said=said(r"RepositoryNotFoundError|Repository Not Found"),
                 doc="huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. Repository Not Found for url"),
    FailureClass(Cause.MODEL_NOT_FOUND, "offline_not_cached", priority=1120,
                 said=said(r"LocalEntryNotFoundError|in the cached files|outgoing traffic has been disabled"
                            r"|OfflineModeIsEnabled"),
                 doc="huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an appropriate cached snapshot"),
    FailureClass(Cause.MODEL_NOT_FOUND, "no_processor", priority=1130,
                 said=said(r"Can't load (?:image processor|processor|feature extractor)"),
                 doc="OSError: Can't load image processor for '/models/my-vlm'."),
    FailureClass(Cause.MODEL_NOT_FOUND, "missing_file", priority=1140,
                 said=said(r"(?P<folder>\S+) does not appear to have a file named (?P<missing>[^.\s]+(?:\.\w+)?)"),
                 doc="OSError: /models/Qwen3-8B does not appear to have a file named tokenizer_config.json."),
    FailureClass(Cause.MODEL_NOT_FOUND, "no_tokenizer", priority=1150, said=said(r"Can't load tokenizer"),
                 doc="OSError: Can't load tokenizer for '/models/x'."),
    FailureClass(Cause.MODEL_NOT_FOUND, "gated", priority=1160, said=said(r"gated repo|401 Client Error|authenticated|GatedRepoError"),
                 doc="OSError: You are trying to access a gated repo."),
    # a layer the checkpoint's quantization config gives no method (`get_quant_method` returned None: AWQ or GPTQ
    # of a MoE model's fused experts before moe_wna16, 0.4.0's FusedMoE), and SGLang's bare assertion on it
    FailureClass(Cause.UNSUPPORTED_MODEL, "quantized_layer", priority=1400,
                 line=lazy_re.compile(r"^assert self\.quant_method is not None"),
                 said=said(r"assert self\.quant_method is not None"),
                 doc="AssertionError (at `assert self.quant_method is not None` in fused_moe_triton/layer.py's FusedMoE.__init__)"),
)
