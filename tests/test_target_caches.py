"""Cache sizes of a target: sysfs parsing, named-CPU figures, defaults and target options.

The default schedule sizes its cache blocks from them, so a wrong parse silently changes
every matmul's schedule: these tests pin the parse on sysfs-shaped folders."""

from pathlib import Path

import pytest

import tilecraft
from tilecraft.pipelines.target import CacheHierarchy, Target, host_caches, parse_size


def _sysfs(root: Path, entries: list[tuple[str, str, str]]) -> Path:
    """A folder shaped like ``/sys/devices/system/cpu/cpu0/cache`` (level, type, size)."""
    for i, (level, kind, size) in enumerate(entries):
        index = root / f"index{i}"
        index.mkdir(parents=True)
        (index / "level").write_text(level + "\n")
        (index / "type").write_text(kind + "\n")
        (index / "size").write_text(size + "\n")
    return root


def test_sysfs_data_and_unified_caches(tmp_path):
    root = _sysfs(tmp_path, [("1", "Data", "48K"), ("1", "Instruction", "32K"),
                             ("2", "Unified", "1024K"), ("3", "Unified", "32768K")])
    assert CacheHierarchy.from_sysfs(root) == CacheHierarchy(l1d=48 << 10, l2=1 << 20, l3=32 << 20)


def test_sysfs_missing_levels_keep_defaults(tmp_path):
    root = _sysfs(tmp_path, [("1", "Data", "64K"), ("1", "Instruction", "64K")])
    assert CacheHierarchy.from_sysfs(root) == CacheHierarchy(l1d=64 << 10)
    assert CacheHierarchy.from_sysfs(tmp_path / "absent") is None
    assert CacheHierarchy.from_sysfs(_sysfs(tmp_path / "i", [("1", "Instruction", "32K")])) is None


def test_sysfs_bad_size_is_a_target_error(tmp_path):
    root = _sysfs(tmp_path, [("1", "Data", "lots")])
    with pytest.raises(tilecraft.TargetError, match="index0/size"):
        CacheHierarchy.from_sysfs(root)


@pytest.mark.parametrize("text,size", [("32K", 32 << 10), ("1M", 1 << 20), ("1024KiB", 1 << 20),
                                       ("65536", 65536), ("2g", 2 << 30), (" 512K ", 512 << 10)])
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "0K", "-1M", "1.5M", "32KB?", "K"])
def test_parse_bad_size(text):
    with pytest.raises(tilecraft.TargetError):
        parse_size(text)


@pytest.mark.parametrize("value", [0, -1, True, 1.5])
def test_bad_hierarchy(value):
    with pytest.raises(tilecraft.TargetError):
        CacheHierarchy(l2=value)


def test_named_cpus_and_defaults():
    assert Target.parse("llvm -mcpu=znver4").caches == CacheHierarchy(32 << 10, 1 << 20, 32 << 20)
    assert Target.parse("llvm -mcpu=sapphirerapids").caches.l2 == 2 << 20
    # An unknown CPU, or a CPU of another machine: the conservative defaults, not the host's.
    assert Target.parse("llvm -mcpu=pentium4").caches == CacheHierarchy()
    assert Target.parse("llvm -mtriple=aarch64-linux-gnu").caches == CacheHierarchy()
    assert Target.parse("llvm").caches == host_caches()


def test_cache_options_override_and_round_trip():
    target = Target.parse("llvm -mcpu=znver4 -l2=2M")
    assert target.caches == CacheHierarchy(32 << 10, 2 << 20, 32 << 20)
    assert str(target) == "llvm -mcpu=znver4 -l1d=32K -l2=2M -l3=32M"
    assert Target.parse(str(target)) == target
    assert hash(Target.parse(str(target))) == hash(target)
    assert Target.parse("llvm -l1d=48K").caches.l1d == 48 << 10


@pytest.mark.parametrize("spec", ["llvm -l2=", "llvm -l2=big", "llvm -l2=0", "llvm -l4=1M"])
def test_bad_cache_options(spec):
    with pytest.raises(tilecraft.TargetError):
        Target.parse(spec)
