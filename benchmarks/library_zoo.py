"""The library zoo: Hugging Face transformers' own architectures, built the way users build
them (``XModel(XConfig(...))``), against onnxruntime and PyTorch eager, measured in one run.

    .venv/bin/python benchmarks/library_zoo.py                     # every model
    .venv/bin/python benchmarks/library_zoo.py --models bert,vit --repeat 15
    .venv/bin/python benchmarks/library_zoo.py --list
    .venv/bin/python benchmarks/library_zoo.py --tiny --repeat 0   # every model at a tiny config, untimed
    .venv/bin/python benchmarks/library_zoo.py --dynamic --models bert  # symbolic batch/length axes

Needs the ``zoo`` extra (``pip install -e '.[zoo]'``: transformers, pinned). Models are built
from their library's default config, or the base-sized config where the default is a large
one (ALBERT's default is xxlarge, EfficientNet's is B7, Llama's is 7B): the sizes are in
``MODELS`` below. Weights are random (seeded, the library's own initialisation; no download),
BatchNorm scales 1 and shifts 0, its statistics calibrated as benchmarks/public_suite.py
does. Text models take 128 token ids (batch 1, no attention mask), vision models a 224x224 image, Wav2Vec2/HuBERT one
second of 16 kHz audio, the Whisper encoder its 30 s log-mel window.

Each model is exported with the TorchScript exporter (``torch.onnx.export(dynamo=False)``,
opset 17, constants folded: the dynamo exporter needs onnxscript, which is not installed
here); models whose default attention is SDPA with grouped-query heads (Llama) are built
with ``attn_implementation="eager"``, since the TorchScript exporter refuses SDPA's
``enable_gqa`` (/work/shared/STACK.md). The first output (``last_hidden_state`` or the
last feature map) is what is compared and timed.

Per model, in a child process of its own as public_suite.py does: ``compile s`` a cold
``tilecraft.compile`` (an empty cache folder), ``torch s`` a cold ``tilecraft.torch.compile``
of the same module; latencies are medians of blocks of calls, the runtimes alternating block
by block with a pause before each (runtime/timing.py's ``alternating``). Checks: tilecraft
against onnxruntime, tilecraft.torch against eager (rtol/atol 1e-3 of the output's largest
magnitude). No thresholds: the table goes into docs/performance.md.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from public_suite import _first_line, _matches, calibrate_batch_norm, compile_torch_route, run_child, table  # noqa: E402


@dataclass(frozen=True)
class LibraryModel:
    """One transformers architecture: its model and config classes, the config's overrides at
    the benchmark's size (``base``) and at the tests' size (``tiny``), and the input it takes."""

    name: str
    model: str                      # transformers class name, e.g. "BertModel"
    config: str                     # its config class, e.g. "BertConfig"
    family: str                     # "text", "vision" or "audio"
    inputs: str                     # "tokens", "image", "waveform" or "mel"
    base: dict[str, Any] = field(default_factory=dict)
    tiny: dict[str, Any] = field(default_factory=dict)
    attention: str | None = None    # attn_implementation, where the default does not export
    encoder_of: bool = False        # the model's encoder (WhisperModel -> its encoder)

    @property
    def summary(self) -> str:
        size = ", ".join(f"{k}={v}" for k, v in self.base.items()) or "default config"
        return f"{self.model} ({size})"


_TEXT_TINY = dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                  max_position_embeddings=64)
_VIT_TINY = dict(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=64)

MODELS = {m.name: m for m in (
    # ---- text ----
    LibraryModel("bert", "BertModel", "BertConfig", "text", "tokens", tiny=_TEXT_TINY),
    LibraryModel("distilbert", "DistilBertModel", "DistilBertConfig", "text", "tokens",
                 tiny=dict(vocab_size=128, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64)),
    LibraryModel("roberta", "RobertaModel", "RobertaConfig", "text", "tokens", tiny=_TEXT_TINY),
    LibraryModel("albert", "AlbertModel", "AlbertConfig", "text", "tokens",
                 base=dict(hidden_size=768, num_attention_heads=12, intermediate_size=3072),  # albert-base-v2
                 tiny=dict(_TEXT_TINY, embedding_size=16)),
    LibraryModel("electra", "ElectraModel", "ElectraConfig", "text", "tokens", tiny=dict(_TEXT_TINY, embedding_size=16)),
    LibraryModel("gpt2", "GPT2Model", "GPT2Config", "text", "tokens",
                 tiny=dict(vocab_size=128, n_embd=32, n_layer=2, n_head=4, n_positions=64)),
    LibraryModel("llama", "LlamaModel", "LlamaConfig", "text", "tokens",
                 # a ~100M Llama with grouped-query attention (the default config is 7B)
                 base=dict(hidden_size=768, intermediate_size=2048, num_hidden_layers=8, num_attention_heads=12,
                           num_key_value_heads=4, vocab_size=32000),
                 tiny=dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64),
                 attention="eager"),
    LibraryModel("t5_encoder", "T5EncoderModel", "T5Config", "text", "tokens",  # the default config is t5-small
                 tiny=dict(vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4)),
    LibraryModel("mobilebert", "MobileBertModel", "MobileBertConfig", "text", "tokens",
                 tiny=dict(vocab_size=128, hidden_size=64, embedding_size=16, num_hidden_layers=2,
                           num_attention_heads=4, intermediate_size=32, intra_bottleneck_size=32,
                           true_hidden_size=32, max_position_embeddings=64)),
    # ---- vision ----
    LibraryModel("vit", "ViTModel", "ViTConfig", "vision", "image", tiny=_VIT_TINY),
    LibraryModel("deit", "DeiTModel", "DeiTConfig", "vision", "image", tiny=_VIT_TINY),
    LibraryModel("dinov2", "Dinov2Model", "Dinov2Config", "vision", "image",
                 tiny=dict(_VIT_TINY, patch_size=8)),
    LibraryModel("beit", "BeitModel", "BeitConfig", "vision", "image", tiny=_VIT_TINY),
    LibraryModel("swin", "SwinModel", "SwinConfig", "vision", "image",  # the default config is swin-tiny
                 tiny=dict(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 4], window_size=4)),
    LibraryModel("convnext", "ConvNextModel", "ConvNextConfig", "vision", "image",  # convnext-tiny
                 tiny=dict(hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1])),
    LibraryModel("resnet", "ResNetModel", "ResNetConfig", "vision", "image",  # resnet-50
                 tiny=dict(embedding_size=8, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1])),
    LibraryModel("mobilenet_v2", "MobileNetV2Model", "MobileNetV2Config", "vision", "image",
                 tiny=dict(depth_multiplier=0.35, image_size=32)),
    LibraryModel("efficientnet", "EfficientNetModel", "EfficientNetConfig", "vision", "image",
                 base=dict(image_size=224, width_coefficient=1.0, depth_coefficient=1.0, hidden_dim=1280),  # B0
                 tiny=dict(image_size=32, width_coefficient=0.25, depth_coefficient=0.25, hidden_dim=320)),
    LibraryModel("regnet", "RegNetModel", "RegNetConfig", "vision", "image",
                 tiny=dict(embedding_size=8, hidden_sizes=[16, 32, 48, 64], depths=[1, 1, 1, 1], groups_width=8)),
    LibraryModel("mobilevit", "MobileViTModel", "MobileViTConfig", "vision", "image",  # mobilevit-small
                 tiny=dict(image_size=64, hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64])),
    LibraryModel("segformer", "SegformerModel", "SegformerConfig", "vision", "image",  # mit-b0
                 tiny=dict(hidden_sizes=[8, 16, 24, 32], num_attention_heads=[1, 1, 2, 2], depths=[1, 1, 1, 1])),
    LibraryModel("levit", "LevitModel", "LevitConfig", "vision", "image",  # levit-128S
                 tiny=dict(image_size=64, hidden_sizes=[16, 24, 32], num_attention_heads=[2, 2, 2], depths=[1, 1, 1],
                           key_dim=[8, 8, 8])),
    LibraryModel("poolformer", "PoolFormerModel", "PoolFormerConfig", "vision", "image",  # poolformer-s12
                 tiny=dict(hidden_sizes=[8, 16, 24, 32], depths=[1, 1, 1, 1])),
    # ---- audio ----
    LibraryModel("wav2vec2", "Wav2Vec2Model", "Wav2Vec2Config", "audio", "waveform",  # wav2vec2-base
                 tiny=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                           conv_dim=(16, 16, 16), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                           num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4)),
    LibraryModel("hubert", "HubertModel", "HubertConfig", "audio", "waveform",
                 tiny=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                           conv_dim=(16, 16, 16), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                           num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4)),
    LibraryModel("whisper_encoder", "WhisperModel", "WhisperConfig", "audio", "mel",  # whisper-tiny's sizes
                 tiny=dict(d_model=32, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=64,
                           decoder_layers=1, decoder_attention_heads=4, decoder_ffn_dim=64, num_mel_bins=16,
                           max_source_positions=32, vocab_size=128, pad_token_id=1, bos_token_id=0,
                           eos_token_id=2, decoder_start_token_id=0),
                 encoder_of=True),
)}


def _inputs(spec: LibraryModel, config: Any, tiny: bool, generator: Any) -> tuple:
    import torch

    if spec.inputs == "tokens":
        vocab = int(getattr(config, "vocab_size", 128))
        return (torch.randint(3, vocab, (1, 16 if tiny else 128), generator=generator),)
    if spec.inputs == "image":
        side = int(getattr(config, "image_size", 224) if tiny else 224)
        channels = int(getattr(config, "num_channels", 3))
        return (torch.randn(1, channels, side, side, generator=generator),)
    if spec.inputs == "waveform":
        return (torch.randn(1, 1600 if tiny else 16000, generator=generator),)
    if spec.inputs == "mel":
        return (torch.randn(1, config.num_mel_bins, 2 * config.max_source_positions, generator=generator),)
    raise ValueError(f"unknown input kind {spec.inputs!r}")


def build(name: str, tiny: bool = False, seed: int = 0) -> tuple[Any, tuple]:
    """The model ``name`` (a wrapper returning its first output) with seeded random weights and
    calibrated BatchNorm statistics, in eval mode, and example inputs."""
    import torch
    import transformers

    spec = MODELS[name]
    torch.manual_seed(seed)
    config = getattr(transformers, spec.config)(**(spec.tiny if tiny else spec.base))
    if spec.attention:
        config._attn_implementation = spec.attention
    inner = getattr(transformers, spec.model)(config)
    if spec.encoder_of:
        inner = inner.get_encoder()

    class First(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = inner

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.model(x, return_dict=False)[0]

    module = First()
    # Some models' own initialisation draws BatchNorm scales like conv weights (EfficientNet:
    # normal, std 0.02): every block then shrinks the activations ~100x and the output was
    # 1e-29, which every comparison passes. Trained nets have scales near 1: start there.
    for norm in module.modules():
        if isinstance(norm, torch.nn.modules.batchnorm._BatchNorm) and norm.affine:
            torch.nn.init.ones_(norm.weight)
            torch.nn.init.zeros_(norm.bias)
    inputs = _inputs(spec, config, tiny, torch.Generator().manual_seed(seed))
    return calibrate_batch_norm(module, inputs, seed=seed), inputs


def export_onnx(module: Any, inputs: tuple, dynamic: bool = False) -> bytes:
    """The TorchScript exporter's ONNX (opset 17, constants folded). ``dynamic``: the batch
    axis of every input symbolic, and the second axis too for token ids and waveforms (the
    ``dynamic_axes`` users pass to serve any batch and length)."""
    import torch

    names = [f"input{i}" for i in range(len(inputs))]
    axes = None
    if dynamic:
        axes = {name: ({0: "batch", 1: "length"} if x.dim() == 2 else {0: "batch"}) for name, x in zip(names, inputs)}
    buffer = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(module, inputs, buffer, dynamo=False, opset_version=17, input_names=names,
                          output_names=["output"], do_constant_folding=True, dynamic_axes=axes)
    return buffer.getvalue()


def measure_one(name: str, repeat: int, threads: int, tiny: bool = False, dynamic: bool = False) -> dict[str, Any]:
    """Everything the table shows for ``name``, measured in this process."""
    os.environ["TILECRAFT_NUM_THREADS"] = str(threads)
    import onnx
    import onnxruntime
    import torch

    from end_to_end import RUNNER_PAUSE_S, PeakRss, alternating  # noqa: E402

    import tilecraft

    torch.set_num_threads(threads)
    result: dict[str, Any] = {"model": name}
    module, inputs = build(name, tiny=tiny)
    started = time.perf_counter()
    try:
        proto = onnx.load_from_string(export_onnx(module, inputs, dynamic))
    except Exception as error:  # noqa: BLE001 (the exporter's refusal is the row's finding)
        result["failed"] = "export: " + _first_line(error)
        proto = None
    result["export_s"] = time.perf_counter() - started
    feeds = {f"input{i}": x.numpy() for i, x in enumerate(inputs)}
    arrays = list(feeds.values())
    with torch.no_grad():
        eager_out = module(*inputs)
    runners: dict[str, Callable[[], Any]] = {"pytorch": lambda: module(*inputs)}

    if proto is not None:
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        session = onnxruntime.InferenceSession(proto.SerializeToString(), options,
                                               providers=["CPUExecutionProvider"])
        reference = session.run(None, feeds)[0]
        runners["onnxruntime"] = lambda: session.run(None, feeds)
        try:
            with PeakRss() as rss:
                started = time.perf_counter()
                compiled = tilecraft.compile(proto, keep_ir=False, verbose=False)
                result["compile_s"] = time.perf_counter() - started
            result["compile_rss_mb"] = rss.added_mb
            result["ok"], result["error"] = _matches(compiled(*arrays), reference)
            runners["tilecraft"] = lambda: compiled(*arrays)
        except tilecraft.TilecraftError as error:
            result["failed"] = _first_line(error)

    compile_torch_route(module, inputs, eager_out, result, runners)

    if repeat > 0:
        with torch.no_grad():
            medians = alternating(runners, repeat, min_sample_s=0.05, pause_s=RUNNER_PAUSE_S)
        result.update({f"{k}_ms": v * 1e3 for k, v in medians.items()})
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", help="comma-separated names (default: all; --list shows them)")
    parser.add_argument("--list", action="store_true", help="list the models and exit")
    parser.add_argument("--tiny", action="store_true", help="the tests' tiny configs (a quick check of every model)")
    parser.add_argument("--dynamic", action="store_true",
                        help="export with a symbolic batch (and token/sample) axis, as served models are")
    parser.add_argument("--repeat", type=int, default=9, help="timed blocks per runtime (median; 0: no timing)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--timeout", type=float, default=900, help="seconds per model's process")
    parser.add_argument("--json", metavar="FILE", help="also write the raw results as JSON")
    parser.add_argument("--table", metavar="FILE", help="print the table of a --json file and exit")
    parser.add_argument("--one", metavar="NAME", help=argparse.SUPPRESS)  # the child's job
    args = parser.parse_args(argv)
    if args.list:
        for m in MODELS.values():
            print(f"{m.name:<16} {m.family:<7} {m.summary}")
        return 0
    if args.table:
        with open(args.table) as stream:
            print(table(json.load(stream)))
        return 0
    if args.one:
        print(json.dumps(measure_one(args.one, args.repeat, args.threads, tiny=args.tiny, dynamic=args.dynamic)))
        return 0
    names = args.models.split(",") if args.models else list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; --list shows them")
    load = os.getloadavg()
    print(f"library zoo (transformers): {len(names)} models{' (tiny configs)' if args.tiny else ''}"
          f"{' (dynamic axes)' if args.dynamic else ''}, "
          f"{args.threads} thread(s) per runtime, median of {args.repeat} blocks; "
          f"load average before {load[0]:.2f} on {os.cpu_count()} cores", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="tilecraft-zoo-cache-") as cache:
        environment = dict(os.environ, TILECRAFT_CACHE_DIR=cache)
        environment.pop("TILECRAFT_COMPILE_CACHE", None)
        for name in names:
            command = [sys.executable, os.path.abspath(__file__), "--one", name, "--repeat", str(args.repeat),
                       "--threads", str(args.threads)]
            command += [flag for flag, on in (("--tiny", args.tiny), ("--dynamic", args.dynamic)) if on]
            results.append(run_child(name, command, args.timeout, environment))
            row = results[-1]
            status = [f"{key}: {row[key]}" for key in ("failed", "torch_failed", "crashed") if key in row]
            status += [f"{key} MISMATCH" for key in ("ok", "torch_ok") if row.get(key) is False]
            print(f"  {name}: done ({time.strftime('%H:%M:%S')}) {'; '.join(status) or 'matches'}",
                  file=sys.stderr, flush=True)
            if args.json:  # after every model: a run cut short keeps what it measured
                with open(args.json, "w") as stream:
                    json.dump(results, stream, indent=1)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
