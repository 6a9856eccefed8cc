"""Deployable packages: load and run a ``model.tar`` with numpy and ctypes only.

A package (written by ``tilecraft compile -o model.tar`` / ``tilecraft.compile(...,
package_path=...)``, see compiler/package.py) is a tar archive with

- ``model.so``: the compiled model, a shared library built from MLIR's LLVM output by
  ``llc`` and the system C compiler. The weights are its read-only data; the parallel loops
  call the small async runtime (runtime/async_runtime.c) linked into it.
- ``manifest.json``: the package format version, the tilecraft version that wrote it, the
  entry symbol, inputs and outputs (names, dtypes, shapes), the dimension relations the
  arguments must satisfy, the target string, the machine and the CPU features the code
  needs, and the SHA-256 of ``model.so``.
- ``profile.so`` (only in packages compiled with ``profile=True``): the same model with a
  timer around every kernel, for ``tilecraft run --profile``.

Why this module imports no MLIR: a package must run where only numpy is installed. Every
call goes through the same argument checks (:class:`EntrySignature`) and memref
descriptors (memref.py) as a JIT-compiled module. Anything wrong with the file is a
:class:`PackageError` naming the problem; a package for another machine is a
:class:`PackageTargetError`.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import platform
import re
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..errors import ArgumentValueError, EntryPointError, PackageError, PackageSignatureError, PackageTargetError
from .checks import TAKE_SYMBOL, check_error, decode_table, take_package_failure
from . import cuda_errors
from .device_array import DeviceArray, device_array, host_views, output_arrays
from .host import host_cpu_flags
from .malloc_policy import keep_freed_memory
from .memref import CallFrame
from .package_signing import SIGNATURE, check_signature, read_key
from .signature import DimGroup, EntrySignature, TensorSpec
from .timing import Timing, time_evaluator

FORMAT_NAME = "tilecraft-package"
# Raise when the manifest or the library's calling convention changes incompatibly.
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
LIBRARY = "model.so"
PROFILE_LIBRARY = "profile.so"
# The call contract (entry symbol, inputs, outputs, equal dims, check messages) compiled into each library as
# a NUL-terminated JSON string under this symbol: the manifest is checked against it at load.
CONTRACT_SYMBOL = "tilecraft_contract"
# The run-time checks' messages belong to it: a package whose list was emptied or edited
# would otherwise drop or misname the failures its code reports (a clamped gather's wrong
# values would come back as a success).
# A package written as a single shared library (path suffix .so) carries its whole manifest
# as a NUL-terminated JSON string under this symbol (its "sha256" table is empty: a file
# cannot hold its own hash).
MANIFEST_SYMBOL = "tilecraft_manifest"
SHARED_LIBRARY_SUFFIX = ".so"
CONTRACT_KEYS = ("entry", "symbol", "inputs", "outputs", "equal_dims", "runtime_checks")
# Part of the contract where the manifest has it: a device package's ``device`` entry says how
# its entry is called (``output_arguments``: the results' destinations as trailing arguments),
# so an edited one would call the code with the wrong arguments. CPU packages have none, and
# their contract is what it always was.
OPTIONAL_CONTRACT_KEYS = ("device",)
# Archive members larger than this are refused before extraction (a library of a large model
# holds its weights; 16 GiB is far above any package this tilecraft writes for one CPU).
MAX_MEMBER_BYTES = 16 << 30
# Shared libraries of C extern functions travel beside model.so (which finds them through
# its $ORIGIN run path); the libraries those need are named in the manifest instead.
BUNDLED_LIBRARY = re.compile(r"lib[A-Za-z0-9_.+-]+\.so(\.[0-9]+)*$")
# Symbols of the profiling library's timer helper (runtime/profile_timer.c).
PROFILE_RESET = "tilecraft_profile_reset"
PROFILE_READ = "tilecraft_profile_read"
PROFILE_CLOCK = "tilecraft_profile_use_thread_clock"


# ---- manifest <-> signature ------------------------------------------------------------

def _spec_to_json(spec: TensorSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "dtype": spec.dtype.name,
        "shape": None if spec.shape is None else list(spec.shape),
        "element_type": spec.element_type,
    }


def _spec_from_json(entry: Mapping[str, Any]) -> TensorSpec:
    shape = entry["shape"]
    return TensorSpec(
        str(entry["name"]),
        np.dtype(entry["dtype"]),
        None if shape is None else tuple(None if d is None else int(d) for d in shape),
        str(entry.get("element_type", "")),
    )


def signature_to_manifest(signature: EntrySignature, output_names: Sequence[str] | None = None) -> dict[str, Any]:
    """The manifest fields that describe how to call the entry function."""
    outputs = [_spec_to_json(spec) for spec in signature.results]
    if output_names is not None:
        if len(output_names) != len(outputs):
            raise PackageError(f"{len(output_names)} output names for {len(outputs)} results")
        for entry, name in zip(outputs, output_names):
            entry["name"] = name
    return {
        "entry": signature.name,
        "symbol": f"_mlir_ciface_{signature.name}",
        "inputs": [_spec_to_json(spec) for spec in signature.arguments],
        "outputs": outputs,
        "equal_dims": [
            {"members": [list(m) for m in group.members], "size": group.size}
            for group in signature.equal_dims
        ],
    }


def signature_from_manifest(manifest: Mapping[str, Any]) -> EntrySignature:
    return EntrySignature(
        str(manifest["entry"]),
        tuple(_spec_from_json(e) for e in manifest["inputs"]),
        tuple(_spec_from_json(e) for e in manifest["outputs"]),
        tuple(
            DimGroup(tuple((int(a), int(b)) for a, b in g["members"]), g["size"])
            for g in manifest["equal_dims"]
        ),
    )


def _check_table(manifest: Mapping[str, Any], where: str) -> list[tuple[str, str]]:
    """The messages of the library's run-time checks (``runtime_checks``: one
    ``"kind\tmessage"`` string per check id; absent in a package without checks)."""
    entries = manifest.get("runtime_checks", [])
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        raise PackageError(f"{where}: runtime_checks in {MANIFEST} must be a list of strings")
    return decode_table(entries)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def normalized_machine(name: str) -> str:
    """``arm64`` and ``aarch64`` are one architecture; so are ``amd64`` and ``x86_64``."""
    return {"arm64": "aarch64", "amd64": "x86_64"}.get(name.lower(), name.lower())


# ---- reading a package ------------------------------------------------------------------

def _load_libraries(manifest: Mapping[str, Any], directory: Path, where: str) -> list[ctypes.CDLL]:
    """Load what the extern functions of a package need, before ``model.so``: the system
    libraries the manifest names (by the recorded path, else by file name through the
    loader's search path, e.g. ``LD_LIBRARY_PATH``), then the bundled ones (hash-checked)."""
    libraries = manifest.get("libraries") or {}
    loaded = []
    for recorded in libraries.get("system", []):
        for candidate in (recorded, os.path.basename(recorded)):
            try:
                loaded.append(ctypes.CDLL(candidate, mode=ctypes.RTLD_GLOBAL))
                break
            except OSError:
                continue
        else:
            raise PackageError(f"{where}: needs the shared library {recorded}, which is not there and "
                               f"not on the loader's search path (install it, or set LD_LIBRARY_PATH)")
    for name in libraries.get("bundled", []):
        path = directory / name
        if not BUNDLED_LIBRARY.match(name) or not path.is_file():
            raise PackageError(f"{where}: the archive lacks the bundled library {name!r}")
        if sha256_file(path) != manifest["sha256"].get(name):
            raise PackageError(f"{where}: {name} is corrupted (SHA-256 mismatch)")
        try:
            loaded.append(ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL))
        except OSError as error:
            raise PackageError(f"{where}: cannot load the bundled {name} ({error})") from None
    return loaded


def _extract(path: Path, directory: Path, trust: bytes | None = None) -> dict[str, Any]:
    """Unpack the package's members into ``directory`` and return its parsed manifest;
    with a ``trust`` key, its signature is checked first (runtime/package_signing.py)."""
    if not path.is_file():
        raise PackageError(f"{path}: no such package file")
    try:
        with tarfile.open(path, "r:*") as archive:
            members = {m.name: m for m in archive.getmembers()}
            if MANIFEST not in members:
                raise PackageError(f"{path}: not a tilecraft package (no {MANIFEST} in the archive)")
            for name, member in members.items():
                # Only the known names (and bundled extern libraries), as regular files: no
                # links, folders or paths that could escape the extraction folder.
                if (name not in (MANIFEST, LIBRARY, PROFILE_LIBRARY, SIGNATURE) and not BUNDLED_LIBRARY.match(name)) \
                        or not member.isfile():
                    raise PackageError(f"{path}: unexpected archive member {name!r}")
                if member.size > MAX_MEMBER_BYTES:
                    raise PackageError(f"{path}: archive member {name!r} is {member.size} bytes, "
                                       f"above the limit of {MAX_MEMBER_BYTES}")
                source = archive.extractfile(member)
                with open(directory / name, "wb") as target:
                    shutil.copyfileobj(source, target)
            if trust is not None:  # before the manifest is even parsed
                check_signature(str(path), trust, directory, members, archive)
    except tarfile.TarError as error:
        raise PackageError(f"{path}: not a tilecraft package, or truncated ({error})") from None
    except (OSError, EOFError) as error:
        raise PackageError(f"{path}: could not read the package ({error})") from None
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
    except (ValueError, UnicodeDecodeError, RecursionError) as error:  # RecursionError: nested too deep
        raise PackageError(f"{path}: {MANIFEST} is not valid JSON ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise PackageError(f"{path}: {MANIFEST} does not describe a tilecraft package")
    return manifest


def contract_json(manifest: Mapping[str, Any]) -> bytes:
    """The canonical JSON of the manifest's call contract (:data:`CONTRACT_KEYS`)."""
    contract = {key: manifest.get(key) for key in CONTRACT_KEYS}
    contract.update({key: manifest[key] for key in OPTIONAL_CONTRACT_KEYS if key in manifest})
    return json.dumps(contract, sort_keys=True).encode()


def check_manifest(manifest: Mapping[str, Any], where: str, machine: str | None = None) -> None:
    """Version, target and required fields; raises naming the first problem. ``machine``:
    the architecture the package must be built for when not this machine's (an emulated
    device, runtime/emulated.py: the emulator's CPU, not this one's flags, runs it)."""
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise PackageError(
            f"{where}: package format {version!r} (written by tilecraft "
            f"{manifest.get('tilecraft_version', '?')}); this tilecraft reads format "
            f"{FORMAT_VERSION}: recompile the model with this version"
        )
    for key in ("entry", "symbol", "inputs", "outputs", "equal_dims", "machine", "target", "sha256"):
        if key not in manifest:
            raise PackageError(f"{where}: {MANIFEST} lacks {key!r}")
    kinds = {"symbol": str, "inputs": list, "outputs": list, "sha256": dict}
    for key, kind in kinds.items():
        if not isinstance(manifest[key], kind):
            raise PackageError(f"{where}: {MANIFEST} field {key!r} must be a {kind.__name__}")
    emulated = machine is not None
    machine = normalized_machine(machine if emulated else platform.machine())
    if normalized_machine(str(manifest["machine"])) != machine:
        raise PackageTargetError(
            f"{where}: built for target '{manifest['target']}' ({manifest['machine']}); "
            f"this machine is {machine}" + (" (emulated)" if emulated else "")
        )
    flags = set() if emulated else host_cpu_flags()
    missing = sorted(set(manifest.get("required_cpu_flags", ())) - flags) if flags else []
    if missing:
        raise PackageTargetError(
            f"{where}: built for target '{manifest['target']}' on a CPU with "
            f"{', '.join(missing)}, which this CPU lacks: recompile it here"
        )


def verify(path: "str | os.PathLike[str]", directory: "str | os.PathLike[str]",
           trust: "bytes | str | os.PathLike[str] | None" = None, machine: str | None = None) -> dict[str, Any]:
    """Unpack ``path`` into ``directory`` and check it without loading any of its code: the
    archive's members, with a ``trust`` key (a key file, or the key's bytes) its signature,
    the manifest (format, fields, this machine's architecture and CPU flags, or the
    emulated ``machine``'s architecture) and the SHA-256 of ``model.so``; returns the manifest.

    Why apart from :class:`Package`: the remote server (runtime/server.py) refuses a bad
    upload in its own process, where nothing of the package may run (``dlopen`` runs the
    library's initializers); the child that runs it then loads it with :func:`load`.
    """
    path, directory = Path(path), Path(directory)
    manifest = _extract(path, directory, None if trust is None else read_key(trust))
    check_manifest(manifest, str(path), machine)
    library = directory / LIBRARY
    if not library.is_file():
        raise PackageError(f"{path}: the archive has no {LIBRARY}")
    if sha256_file(library) != manifest["sha256"].get(LIBRARY):
        raise PackageError(f"{path}: {LIBRARY} is corrupted (its SHA-256 does not match the manifest)")
    # Every file the manifest hashes must be there: an archive cut where one member ends and
    # the next begins reads without a tar error (a package cut after model.so loaded and then
    # could not profile).
    missing = [str(name) for name in manifest["sha256"] if not (directory / str(name)).is_file()]
    if missing:
        raise PackageError(f"{path}: the archive is truncated or incomplete: the manifest lists "
                           f"{', '.join(missing)}, which it lacks")
    libraries = manifest.get("libraries") or {}
    bundled = libraries.get("bundled", []) if isinstance(libraries, dict) else []
    for name in (*bundled, PROFILE_LIBRARY):
        member = directory / str(name)
        if member.is_file() and sha256_file(member) != manifest["sha256"].get(name):
            raise PackageError(f"{path}: {name} is corrupted (its SHA-256 does not match the manifest)")
    return manifest


@dataclass(frozen=True)
class KernelTime:
    """Time spent in one kernel (a top-level loop nest of the entry function) per call."""

    name: str
    calls: int
    seconds: float


class Package:
    """A loaded package: call it like a :class:`CompiledModule` (numpy in, numpy out).

    Attributes:
      manifest: the parsed ``manifest.json``.
      signature: the entry signature the arguments are checked against.
      output_names: names of the outputs in order (the ONNX graph's, for ONNX models).
    """

    def __init__(self, path: "str | os.PathLike[str]", *,
                 trust: "bytes | str | os.PathLike[str] | None" = None) -> None:
        self.path = Path(path)
        key = None if trust is None else read_key(trust)  # a bad key file: before unpacking
        if self.path.suffix == SHARED_LIBRARY_SUFFIX:
            if key is not None:
                raise PackageSignatureError(
                    f"{self.path}: a shared library carries no signature, and loading it to look "
                    "would run its code: export a .tar package and sign it (--sign) to use trust=")
            self._load_shared_library()
        else:
            self._load_archive(key)
        self.output_names = [entry["name"] for entry in self.manifest["outputs"]]
        self._frame = CallFrame(self.signature, packed=False)
        keep_freed_memory()  # intermediates reused across calls, not page-faulted anew
        self._check_table = _check_table(self.manifest, str(self.path))
        self._takes: dict[int, Any] = {}
        self._device = self._check_device()
        # A device package's entry takes its results' destinations after its arguments
        # (targets/cuda/memory.py OUTPUT_ARGUMENTS): null ones here, device arrays in device_call.
        device = self.manifest.get("device")
        self._output_arguments = isinstance(device, dict) and device.get("output_arguments") is True
        if self._output_arguments:
            self._frame = CallFrame(self.signature, packed=False, output_arguments=True)

    def _check_device(self) -> bool:
        """Whether this is a device (CUDA) package; raises at load where its device cannot run
        (no driver, no GPU: :class:`DeviceUnavailableError`, from runtime/cuda_runtime.c, whose
        module-load constructors ran when model.so was opened)."""
        carries = cuda_errors.has_cuda_runtime(self._library)
        if "device" in self.manifest and not carries:
            raise PackageError(f"{self.path}: the manifest names a device but {LIBRARY} has no device runtime")
        if carries:
            cuda_errors.raise_pending(self._library, str(self.path))
        return carries

    def close(self) -> None:
        """Free what the package holds outside this process's memory: a CUDA package's
        device-resident weights (a later call uploads them again). The library stays loaded."""
        if getattr(self, "_device", False):
            cuda_errors.release(self._library)

    def device_array(self, array: Any, dtype: Any = None) -> DeviceArray:
        """``array`` uploaded to the device through this CUDA package's runtime (a
        :class:`~tilecraft.runtime.device_array.DeviceArray` its calls take without host
        copies); :class:`PackageError` for a CPU package."""
        if not getattr(self, "_device", False):
            raise PackageError(f"{self.path} is a CPU package: it takes numpy arrays")
        return device_array(array, dtype, runtime=self._library)

    def device_call(self, *args: Any, out: "DeviceArray | Sequence[DeviceArray] | None" = None,
                    **kwargs: Any) -> "DeviceArray | tuple[DeviceArray, ...]":
        """Call a CUDA package with the outputs left on the device: :class:`DeviceArray`
        results, copied device to device from the call's arena, none to the host. ``out``:
        the arrays to write (one per output, of its shape and dtype, overlapping no input:
        runtime/device_array.py ``output_arrays``), else fresh ones are allocated. Inputs as
        for a plain call (numpy or device arrays); one called ``out`` goes by position.
        :class:`PackageError` for a CPU package or one built before device outputs."""
        if not getattr(self, "_device", False):
            raise PackageError(f"{self.path} is a CPU package: its outputs are numpy arrays")
        if not self._output_arguments:
            raise PackageError(f"{self.path} was built without output arguments for device outputs: recompile it")
        outputs = output_arrays(self.signature, out, [*args, *kwargs.values()], runtime=self._library)
        views, named = host_views(args, kwargs)
        self._frame.call_into(self._entry, views, named, [array.pointer for array in outputs])
        cuda_errors.raise_pending(self._library, str(self.path))
        if self._check_table:
            failure = take_package_failure(self._take_failure(self._entry))
            if failure is not None:
                raise check_error(self._check_table, failure)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def __enter__(self) -> "Package":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _load_shared_library(self) -> None:
        """A package written as one ``.so`` (``export_library("f.so")``): its manifest is
        the string the library carries under :data:`MANIFEST_SYMBOL`. Such a library calls
        no bundled extern library and has no profiling variant (the writer refuses both)."""
        if not self.path.is_file():
            raise PackageError(f"{self.path}: no such shared library")
        # Absolute: dlopen looks a name without a slash up on the library search path.
        self._library = self._open(self.path.resolve())
        address = ctypes.cast(self._symbol(self._library, MANIFEST_SYMBOL), ctypes.c_void_p).value
        try:
            self.manifest = json.loads(ctypes.string_at(address))
        except (ValueError, UnicodeDecodeError, RecursionError) as error:
            raise PackageError(f"{self.path}: its embedded manifest is not valid JSON ({error})") from None
        if not isinstance(self.manifest, dict) or self.manifest.get("format") != FORMAT_NAME:
            raise PackageError(f"{self.path}: not a library tilecraft wrote (no package manifest)")
        check_manifest(self.manifest, str(self.path))
        try:
            self.signature = signature_from_manifest(self.manifest)
        except (KeyError, TypeError, ValueError) as error:
            raise PackageError(f"{self.path}: malformed signature in its manifest ({error})") from None
        self._dependencies = []
        self._check_contract(self._library)
        self._entry = self._symbol(self._library, self.manifest["symbol"])
        self._profile_library = None

    def _load_archive(self, key: bytes | None) -> None:
        directory = Path(tempfile.mkdtemp(prefix="tilecraft-package-"))
        # The libraries stay mapped after their files are gone; the directory is only
        # needed until dlopen has run.
        try:
            self.manifest = verify(self.path, directory, key)
            library = directory / LIBRARY
            try:
                self.signature = signature_from_manifest(self.manifest)
            except (KeyError, TypeError, ValueError) as error:
                raise PackageError(f"{self.path}: malformed signature in {MANIFEST} ({error})") from None
            self._dependencies = _load_libraries(self.manifest, directory, str(self.path))
            self._library = self._open(library)
            self._check_contract(self._library)
            self._entry = self._symbol(self._library, self.manifest["symbol"])
            self._profile_library = None
            profile = directory / PROFILE_LIBRARY
            if profile.is_file():
                if sha256_file(profile) != self.manifest["sha256"].get(PROFILE_LIBRARY):
                    raise PackageError(f"{self.path}: {PROFILE_LIBRARY} is corrupted (SHA-256 mismatch)")
                self._profile_library = self._open(profile)
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    def _open(self, library: Path) -> ctypes.CDLL:
        try:
            return ctypes.CDLL(str(library), mode=ctypes.RTLD_LOCAL)
        except OSError as error:
            raise PackageError(f"{self.path}: cannot load {library.name} ({error})") from None

    def _check_contract(self, library: ctypes.CDLL) -> None:
        """Refuse a manifest whose call contract differs from the one compiled into the
        library. Why: the library's hash only proves the library intact; an edited manifest
        (other shapes, dtypes or outputs) would otherwise bind arguments the code does not
        expect and read or write outside its buffers."""
        address = ctypes.cast(self._symbol(library, CONTRACT_SYMBOL), ctypes.c_void_p).value
        embedded = ctypes.string_at(address)
        if embedded != contract_json(self.manifest):
            raise PackageError(
                f"{self.path}: {MANIFEST} does not match the call contract compiled into {LIBRARY} "
                "(inputs, outputs, entry or run-time check messages edited): recompile the model"
            )

    def _symbol(self, library: ctypes.CDLL, name: str) -> Any:
        try:
            function = getattr(library, name)
        except AttributeError:
            raise PackageError(f"{self.path}: the library has no symbol {name}") from None
        function.restype = None
        return function

    @property
    def has_profile(self) -> bool:
        """Whether the package carries the per-kernel profiling variant."""
        return self._profile_library is not None

    @property
    def input_names(self) -> list[str]:
        return [spec.name for spec in self.signature.arguments]

    def __call__(self, *args: Any, **kwargs: Any) -> "np.ndarray | tuple[np.ndarray, ...]":
        if not self._check_table and not self._device:  # nothing to take after the call: one Python frame fewer
            return self._frame.call(self._entry, args, kwargs)
        if self._device:  # DeviceArray arguments: their device addresses (runtime/device_array.py)
            args, kwargs = host_views(args, kwargs)
        return self._call(self._entry, args, kwargs)

    def _call(self, entry: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        outputs = self._frame.call(entry, args, kwargs)
        if self._device:  # a failed driver call: the outputs are freed with their arrays
            cuda_errors.raise_pending(self._library, str(self.path))
        if self._check_table:
            failure = take_package_failure(self._take_failure(entry))
            if failure is not None:  # the outputs are freed with their arrays
                raise check_error(self._check_table, failure)
        return outputs

    def _take_failure(self, entry: Any) -> Any:
        """The run-time check report of the library ``entry`` belongs to (runtime_checks.c)."""
        library = self._profile_library if entry is not self._entry else self._library
        take = self._takes.get(id(library))
        if take is None:
            take = library[TAKE_SYMBOL]
            take.restype = ctypes.c_int
            take.argtypes = [ctypes.POINTER(ctypes.c_int64)]
            self._takes[id(library)] = take
        return take

    def profile(self, *args: Any, **kwargs: Any) -> "tuple[Any, list[KernelTime]]":
        """Run the profiling variant once: the outputs and the time of each kernel."""
        if self._profile_library is None:
            raise PackageError(
                f"{self.path}: compiled without the profiling variant; recompile with "
                "`tilecraft compile --profile` (or profile=True)"
            )
        library = self._profile_library
        entry = self._symbol(library, self.manifest["symbol"])
        kernels = self.manifest["profile"]["kernels"]
        library[PROFILE_RESET].restype = None
        library[PROFILE_RESET]()
        outputs = self._call(entry, args, kwargs)
        read = library[PROFILE_READ]
        read.restype = None
        read.argtypes = [ctypes.c_int64, ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_int64)]
        times: list[KernelTime] = []
        for index, name in enumerate(kernels):
            seconds, calls = ctypes.c_double(), ctypes.c_int64()
            read(index, ctypes.byref(seconds), ctypes.byref(calls))
            times.append(KernelTime(name, calls.value, seconds.value))
        return outputs, times

    def use_profile_clock(self, name: str) -> None:
        """Time :meth:`profile`'s kernels by ``name``: ``"wall"`` (the default) or
        ``"thread_cpu"``, the calling thread's CPU time, which a busy machine does not
        lengthen but which counts that thread's work only: right for one-thread builds
        (runtime/timing.py)."""
        if name not in ("wall", "thread_cpu"):
            raise ArgumentValueError(f"the profile clock must be 'wall' or 'thread_cpu', got {name!r}")
        if self._profile_library is None:
            raise PackageError(f"{self.path}: compiled without the profiling variant")
        choose = self._profile_library[PROFILE_CLOCK]
        choose.restype = None
        choose.argtypes = [ctypes.c_int64]
        choose(1 if name == "thread_cpu" else 0)

    def time_evaluator(self, name: str | None = None, *, number: int = 10, repeat: int = 1,
                       min_repeat_ms: float = 0.0) -> "Callable[..., Timing]":
        """TVM's ``time_evaluator`` (runtime/timing.py): ``evaluator(*args)`` times calls of
        the entry on those arguments. ``name``, when given, must be the entry's."""
        if name is not None and name != self.signature.name:
            raise EntryPointError(f"{self.path}: no function {name!r}; the entry is {self.signature.name!r}")
        return time_evaluator(self, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms)

    def __repr__(self) -> str:
        return f"<Package {self.path.name} {self.signature} target='{self.manifest['target']}'>"


def load(path: "str | os.PathLike[str]", *, trust: "bytes | str | os.PathLike[str] | None" = None) -> Package:
    """Load a package written by ``tilecraft compile -o`` or ``export_library``: a ``.tar``
    archive, or a ``.so`` holding the model alone; see the module docstring.

    ``trust``: a key file (or the key's bytes): refuse the package unless it is signed with
    that key and unchanged since (:class:`PackageSignatureError`, raised before any of its
    code loads; runtime/package_signing.py). Only ``.tar`` packages carry signatures."""
    return Package(path, trust=trust)


def load_module(path: "str | os.PathLike[str]", *,
                trust: "bytes | str | os.PathLike[str] | None" = None) -> Package:
    """TVM's ``tvm.runtime.load_module``: :func:`load` under the name TVM users know."""
    return load(path, trust=trust)
