"""The WorldMemBench release's weights pack as a second place to find the learned backbones' files (read only).

Facts (the pack's model card, https://huggingface.co/rescuerz/WorldMemBench-weights): 72 GB of safetensors and ONNX
files; "Model packages are stored once under ``models/``, retaining their upstream names. The WorldMemBench
downloader creates relative symlinks under ``metrics/<metric>/`` after downloading"; the authors' downloader is
``python scripts/download_release.py weights --datasets-dir DIR`` followed by ``export
WORLDMEMBENCH_DATASETS_DIR=DIR``; ViPE ships as a Hugging Face cache snapshot under
``models/vipe/huggingface/hub/.../snapshots/...``. The exact file tree is not public: which folder holds which
backbone is a data table (``evaluate/weights_pack.yaml``, extendable through ``$WORLDMEM_PACK_MAP``) whose names are
inferences, and the lookup is tolerant: it tries the table's ``metrics/<metric>/`` and ``models/<upstream name>/``
folders first, then any folder under ``metrics/`` and ``models/`` that holds the backbone's files.

The pack root is ``paths.weights`` when that folder is laid out like a pack (a ``models/`` folder beside
``metrics/``, or holding one of the table's upstream names), else ``$WORLDMEMBENCH_DATASETS_DIR`` (or the one folder
just below it laid out so: whether the downloader nests the pack inside the datasets folder is not public). Links are
followed only while they stay inside the pack root: a link that leads out of it, or one that never resolves (a link
loop) or an entry that cannot be read, is refused with :class:`PackLinkError` (a user error naming it) where a
backbone would use it, and never followed while searching. Nothing here
downloads or writes anything.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from harness.errors import ConfigError, UserError

PACK_ENV = "WORLDMEMBENCH_DATASETS_DIR"
MAP_ENV = "WORLDMEM_PACK_MAP"
TABLE_FILE = Path(__file__).resolve().parent / "weights_pack.yaml"
CARD = "https://huggingface.co/rescuerz/WorldMemBench-weights"
#: how deep below the pack root a backbone's folder may lie (models/<x>/huggingface/hub/models--a--b/snapshots/<rev>)
MAX_DEPTH = 8
HOW_TO_GET = ("or use the release's weights pack: `hf download rescuerz/WorldMemBench-weights --local-dir DIR` "
              "(or the authors' `python scripts/download_release.py weights --datasets-dir DIR` once their code is "
              f"public), then `export {PACK_ENV}=DIR` (docs/backbones.md, \"Release weights pack\")")


class PackLinkError(UserError):
    """A link inside the weights pack leads out of the pack root, or never resolves (a link loop), or an entry there
    cannot be read: refused where a backbone would read it (the pack is read only through its own files). The message
    names the entry, what is wrong with it and the fix."""


@dataclass(frozen=True)
class PackEntry:
    """Where the pack may hold one backbone (one entry of ``weights_pack.yaml``)."""

    name: str
    metrics: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    identify: Optional[dict[str, Any]] = None
    hf_cache: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class PackMatch:
    """A backbone found in the pack.

    ``dir``: the folder handed to the backbone's ``load`` (inside the pack, links not resolved); ``files``: each
    required file -> its path relative to the pack root, with `` -> <target>`` when it is a link (the target also
    relative); ``via``: the table entry or ``search`` that found it."""

    name: str
    dir: Path
    files: dict[str, str]
    via: str


@dataclass
class PackCache:
    """A Hugging Face cache the pack holds for a backbone: ``home`` (the folder to use as ``HF_HOME``, relative to
    the pack root), its ``snapshots`` (relative paths) and the environment the backbone's runner gets."""

    home: str
    snapshots: list[str]
    env: dict[str, str]


def _names(v: object, where: str) -> tuple[str, ...]:
    if v is None:
        return ()
    if not isinstance(v, list) or not all(isinstance(x, str) and x.strip() for x in v):
        raise ConfigError(f"{where}: expected a list of folder names")
    for x in v:
        if Path(x).is_absolute() or ".." in Path(x).parts:
            raise ConfigError(f"{where}: {x!r} must be a relative folder name inside the pack")
    return tuple(v)


def _entries(data: object, source: str) -> dict[str, dict[str, Any]]:
    if data is None:
        return {}
    b = data.get("backbones") if isinstance(data, dict) else None
    if not isinstance(b, dict):
        raise ConfigError(f"{source}: expected a mapping `backbones: {{<name>: {{metrics: [...], models: [...]}}}}` "
                          f"(see {TABLE_FILE})")
    for k, v in b.items():
        if not isinstance(v, dict):
            raise ConfigError(f"{source}: backbones.{k} must be a mapping (metrics, models, identify, ...)")
    return b


def load_table(extra: Optional[Path] = None) -> dict[str, PackEntry]:
    """The built-in table merged with ``extra`` (default ``$WORLDMEM_PACK_MAP``): the extra file's names come first,
    then the built-in ones unless the entry says ``replace: true``; its ``identify`` / ``hf_cache`` / ``env`` win."""
    import yaml

    base = _entries(yaml.safe_load(TABLE_FILE.read_text()), str(TABLE_FILE))
    extra = extra if extra is not None else (Path(os.environ[MAP_ENV]).expanduser() if os.environ.get(MAP_ENV)
                                             else None)
    over: dict[str, dict[str, Any]] = {}
    if extra is not None:
        if not Path(extra).is_file():
            raise ConfigError(f"{MAP_ENV}={extra}: no such file; point it at a YAML file shaped like {TABLE_FILE}")
        try:
            over = _entries(yaml.safe_load(Path(extra).read_text()), str(extra))
        except yaml.YAMLError as exc:
            raise ConfigError(f"{MAP_ENV}={extra}: not YAML ({exc})") from None
    out = {}
    for name in sorted(set(base) | set(over)):
        b, o = base.get(name, {}), over.get(name, {})
        keep = not o.get("replace", False)
        src = f"{extra}: backbones.{name}" if o else f"{TABLE_FILE}: backbones.{name}"

        def merged(key: str, o: dict[str, Any] = o, b: dict[str, Any] = b, keep: bool = keep, src: str = src) -> tuple[str, ...]:
            got = list(_names(o.get(key), f"{src}.{key}")) + (list(_names(b.get(key), key)) if keep else [])
            return tuple(dict.fromkeys(got))

        ident = o.get("identify", b.get("identify"))
        if ident is not None and not (isinstance(ident, dict) and isinstance(ident.get("file"), str)
                                      and isinstance(ident.get("key"), str)):
            raise ConfigError(f"{src}.identify: expected {{file: config.json, key: model_type, values: [...]}}")
        env = {**(b.get("env") or {}), **(o.get("env") or {})}
        out[name] = PackEntry(name, merged("metrics"), merged("models"), ident, merged("hf_cache"),
                              {str(k): str(v) for k, v in env.items()})
    return out


def looks_like_pack(d: Path, table: Optional[dict[str, PackEntry]] = None) -> bool:
    """``d`` is laid out like the pack: ``models/`` beside ``metrics/`` (what the downloader makes), or ``models/``
    holding one of the table's upstream names (what `hf download` of the repository makes: no ``metrics/``)."""
    d = Path(d)
    if not (d / "models").is_dir():
        return False
    if (d / "metrics").is_dir():
        return True
    table = table if table is not None else load_table()
    return any((d / "models" / m).is_dir() for e in table.values() for m in e.models)


def discover(configured: Optional[Path] = None) -> tuple[Optional[Path], str]:
    """The pack root and how it was found: ``configured`` (``paths.weights``) when it is laid out like a pack, else
    ``$WORLDMEMBENCH_DATASETS_DIR`` when it is one. Returns ``(None, why)`` when there is none (``why`` says why an
    environment value was not used, empty when the variable is unset)."""
    table = None
    if configured is not None and Path(configured).is_dir():
        table = load_table()
        if looks_like_pack(Path(configured), table):
            return Path(configured), "paths.weights"
    env = os.environ.get(PACK_ENV)
    if not env:
        return None, ""
    p = Path(os.path.expanduser(env))
    if not p.is_dir():
        return None, f"{PACK_ENV}={env}: no such folder (ignored)"
    table = table if table is not None else load_table()
    if looks_like_pack(p, table):
        return p, PACK_ENV
    # Inference: the variable names the authors' *datasets* folder (`--datasets-dir`); whether the downloader puts
    # models/ and metrics/ at its top or in a sub-folder is not public, so one folder below is accepted when exactly
    # one holds the pack's layout.
    subs = sorted(c for c in p.iterdir() if c.is_dir() and looks_like_pack(c, table))
    if len(subs) == 1:
        return subs[0], f"{PACK_ENV} (its {subs[0].name}/ folder)"
    if len(subs) > 1:
        return None, (f"{PACK_ENV}={env}: several folders are laid out like the weights pack "
                      f"({', '.join(c.name for c in subs)}); point it at one (ignored)")
    return None, f"{PACK_ENV}={env}: holds no weights pack (no models/ folder of the release; ignored)"


class WeightsPack:
    """A weights pack rooted at ``root``, indexed once (folder -> its entries) without leaving the root."""

    def __init__(self, root: Path, table: Optional[dict[str, PackEntry]] = None, found_by: str = ""):
        self.root = Path(root)
        self.real = Path(os.path.realpath(self.root))
        self.table = table if table is not None else load_table()
        self.found_by = found_by
        #: folder (relative, "/"-joined) -> {entry name: "file" | "dir" | "out"}
        self._index: Optional[dict[str, dict[str, str]]] = None
        #: links leading out of the root: relative path -> where they point
        self.refused: dict[str, str] = {}
        #: entries that cannot be read at all: relative path -> why (a link loop, no permission)
        self.broken: dict[str, str] = {}

    @classmethod
    def discover(cls, configured: Optional[Path] = None) -> Optional["WeightsPack"]:
        root, how = discover(configured)
        return cls(root, found_by=how) if root is not None else None

    # -- containment ---------------------------------------------------------------------------------------------

    def _within(self, path: str) -> bool:
        return any(path == str(r) or path.startswith(str(r) + os.sep)
                   for r in (self.real, Path(os.path.abspath(self.root))))

    def inside(self, p: Path) -> bool:
        """``p`` with every link resolved stays inside the pack root, and so does every hop when ``p`` is a chain of
        links (a link that leaves the pack and comes back through an outside link is still a way out)."""
        cur = os.path.abspath(p)
        for _ in range(40):  # each hop of a chain of links (the kernel's own limit is 40)
            if not os.path.islink(cur):
                break
            cur = os.path.normpath(os.path.join(os.path.dirname(cur), os.readlink(cur)))
            if not self._within(cur):
                return False
        real = os.path.realpath(p)
        return real == str(self.real) or real.startswith(str(self.real) + os.sep)

    def rel(self, p: Path) -> str:
        """``p`` relative to the pack root; reached through a link, with `` -> <target relative to the root>``."""
        r = os.path.relpath(p, self.root)
        target = os.path.relpath(os.path.realpath(p), self.real)
        if target != r:  # the file, or a folder above it, is a link (the downloader's metrics/ view)
            r += " -> " + target
        return r.replace(os.sep, "/")

    def _refuse(self, rel: str) -> PackLinkError:
        if rel in self.broken:
            return PackLinkError(
                f"weights pack {self.root}: {rel} is {self.broken[rel]}; refused. Replace it with the file itself "
                f"or a link to a file inside the pack (the downloader's links under metrics/ point to ../../models/)")
        return PackLinkError(
            f"weights pack {self.root}: {rel} is a link to {self.refused.get(rel) or os.readlink(self.root / rel)}, "
            f"outside the pack root; refused (the pack's links must stay inside it, as the downloader's relative "
            f"links under metrics/ to ../../models/ do). Replace it with the file itself or a link inside the pack")

    # -- index ---------------------------------------------------------------------------------------------------

    def index(self) -> dict[str, dict[str, str]]:
        if self._index is None:
            self._index = {}
            for top in ("metrics", "models"):
                if (self.root / top).is_dir() and self.inside(self.root / top):
                    self._walk(self.root / top, top, 1, ())
                elif os.path.islink(self.root / top):
                    self._kind(self.root / top, top)  # a link out, or a loop: recorded there
        return self._index

    def _blocked(self) -> dict[str, str]:
        """Every entry a backbone must not read through: links out of the pack and entries that cannot be read."""
        return {**self.refused, **self.broken}

    def _kind(self, path: Path, rel: str) -> str:
        """What the entry ``path`` (``rel`` inside the pack) is: ``file``, ``dir``, ``out`` (a link leading out of the
        pack), ``broken`` (a link loop, or an entry that cannot be read: recorded in :attr:`broken`) or ``other`` (a
        dangling link, a FIFO, a device: never a weights file). Never raises."""
        import errno

        if os.path.islink(path) and not self.inside(path):
            self.refused[rel] = os.readlink(path)
            return "out"
        try:
            st = os.stat(path)  # follows links: a loop raises ELOOP here
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                self.broken[rel] = f"a link loop (it leads back to itself: {os.readlink(path)})"
                return "broken"
            if exc.errno == errno.ENOENT and os.path.islink(path):
                return "other"  # a dangling link: as if absent
            self.broken[rel] = f"unreadable ({exc.strerror})"
            return "broken"
        import stat

        return "dir" if stat.S_ISDIR(st.st_mode) else "file" if stat.S_ISREG(st.st_mode) else "other"

    def _walk(self, d: Path, rel: str, depth: int, above: tuple[str, ...]) -> None:
        """Index folder ``d`` (``rel`` inside the pack) and those below it; ``above``: the real paths of the folders
        above it on this path (a link back to one of them is a cycle and is not entered again)."""
        real = os.path.realpath(d)
        if real in above or depth > MAX_DEPTH:  # a link cycle, or deeper than any layout the card describes
            return
        entries: dict[str, str] = {}
        self._index[rel] = entries  # type: ignore[index]
        try:
            children = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            return
        for e in children:
            child = f"{rel}/{e.name}"
            kind = self._kind(Path(e.path), child)
            if kind != "other":
                entries[e.name] = kind
            if kind == "dir":
                self._walk(Path(e.path), child, depth + 1, (*above, real))

    # -- lookup --------------------------------------------------------------------------------------------------

    def _candidates(self, entry: Optional[PackEntry]) -> list[tuple[str, str, bool]]:
        """(folder prefix, how it was chosen, named by the table) in search order."""
        out = []
        if entry is not None:
            out += [(f"metrics/{m}", f"metrics/{m} (table)", True) for m in entry.metrics]
            out += [(f"models/{m}", f"models/{m} (table)", True) for m in entry.models]
        out += [("metrics", "search", False), ("models", "search", False)]
        return out

    def _identified(self, folder: str, ident: Optional[dict[str, Any]]) -> bool:
        if not ident:
            return True
        p = self.root / folder / ident["file"]
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            return False
        if not isinstance(data, dict) or ident["key"] not in data:
            return False
        return not ident.get("values") or data[ident["key"]] in ident["values"]

    def locate(self, name: str, files: tuple[str, ...], revision: Optional[str] = None) -> Optional[PackMatch]:
        """The first folder of the pack holding every one of ``files`` (and passing the entry's ``identify``), in
        the order of :meth:`_candidates`; None when the pack does not hold them. A folder the table names whose file
        (or which itself) is a link out of the pack raises :class:`PackLinkError`. Within a candidate, a Hugging
        Face snapshot named ``revision`` comes before other folders."""
        if not files:
            return None
        idx = self.index()
        entry = self.table.get(name)
        ident = entry.identify if entry else None
        tried: set[str] = set()
        for prefix, via, named in self._candidates(entry):
            if named:
                for r in self._blocked():  # the named folder, a folder above it or an entry below it: a link out
                    if prefix == r or prefix.startswith(r + "/") or r.startswith(prefix + "/"):  # (or a loop)
                        raise self._refuse(r)
            folders = [f for f in idx if f == prefix or f.startswith(prefix + "/")]
            folders.sort(key=lambda f: (f.rsplit("/", 1)[-1] != revision, f.count("/"), f))
            for f in folders:
                if f in tried:
                    continue
                tried.add(f)
                entries = idx[f]
                if not all(x in entries for x in files):
                    continue
                out = [x for x in files if entries[x] in ("out", "broken")]
                if out:
                    if named:
                        raise self._refuse(f"{f}/{out[0]}")
                    continue  # the open search never uses a folder with a link out (or a loop)
                if any(entries[x] != "file" for x in files) or not self._identified(f, ident):
                    continue
                d = self.root / f
                return PackMatch(name, d, {x: self.rel(d / x) for x in files}, via)
        return None

    def partial(self, name: str, files: tuple[str, ...]) -> list[str]:
        """Where the table's folders hold some of ``files``, or all of them for another model (the "not held" note)."""
        entry = self.table.get(name)
        if entry is None:
            return []
        prefixes = [f"metrics/{m}" for m in entry.metrics] + [f"models/{m}" for m in entry.models]
        out = []
        for f, entries in self.index().items():
            if any(f == p or f.startswith(p + "/") for p in prefixes):
                have = [x for x in files if entries.get(x) == "file"]
                if len(have) == len(files) and entry.identify:
                    i = entry.identify
                    out.append(f"{f}/ has them, but its {i['file']} is not {i['key']}="
                               f"{'|'.join(map(str, i.get('values') or ['...']))}: another model")
                elif have:
                    out.append(f"{f}/ has {', '.join(have)}")
        return out

    def cache(self, name: str) -> Optional[PackCache]:
        """The Hugging Face cache the pack holds for backbone ``name`` (its ``hf_cache`` folders holding at least one
        ``hub/models--*/snapshots/<rev>/`` with files), None when it holds none. A link out of the pack inside the
        cache raises :class:`PackLinkError` (the backbone's runner would read through it)."""
        entry = self.table.get(name)
        if entry is None or not entry.hf_cache:
            return None
        idx = self.index()
        for home in entry.hf_cache:
            for r in self._blocked():
                if r == home or r.startswith(home + "/") or home.startswith(r + "/"):
                    raise self._refuse(r)
            snaps = sorted(f for f, ent in idx.items() if f.startswith(home + "/hub/models--")
                           and f.rsplit("/", 2)[-2] == "snapshots" and any(v == "file" for v in ent.values()))
            if snaps:
                env = {k: v.replace("{hf_cache}", str(self.root / home)) for k, v in entry.env.items()}
                return PackCache(home, snaps, env)
        return None
