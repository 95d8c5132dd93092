"""One interface over the tokenizers that :mod:`cnfmce.evaluation` compares.

:func:`as_encoder` wraps any of

* a :class:`cnfmce.Tokenizer` (MCE or FMM over its vocabulary),
* a ``tiktoken.Encoding`` (tiktoken's own BPE with its regex pre-tokenizer),
* a Hugging Face ``tokenizers.Tokenizer`` (its own normalizer, pre-tokenizer and model), or a
  ``transformers`` fast tokenizer (its ``backend_tokenizer``),
* a ``sentencepiece.SentencePieceProcessor``,
* a string *spec* or path (see :func:`load_encoder`),

in an :class:`Encoder` with the same small surface:

``name``
    a label for tables;
``encode(text) -> list[int]`` / ``encode_batch(texts) -> list[list[int]]``
    plain text in, token ids out, with no special tokens added and special-token text treated as
    ordinary text where the library allows it (cnfmce, tiktoken's ``encode_ordinary``;
    ``tokenizers`` always matches its added tokens);
``decode(ids) -> str``
    the library's own decoder (used for the round-trip metric);
``token_bytes(id) -> bytes``
    the exact bytes a token stands for (needed by every metric that aligns tokens with bytes);
``vocab_size``
    the declared vocabulary size (ids in use, special and added tokens included);
``kind``
    ``"cnfmce"``, ``"tiktoken"``, ``"hf"`` or ``"sentencepiece"``.

Token bytes per library:

* cnfmce: ``Tokenizer.id_to_token`` (special tokens: their UTF-8 text).
* tiktoken: ``Encoding.decode_single_token_bytes``.
* Hugging Face: byte-level vocabularies (a ``ByteLevel`` pre-tokenizer or decoder) map every
  character of the token string back through GPT-2's byte-to-unicode alphabet
  (:func:`cnfmce.formats.bytes_to_unicode`); other vocabularies use the SentencePiece convention
  below, with a WordPiece ``##`` continuation prefix dropped. Added tokens are their UTF-8 content.
* SentencePiece: the piece with ``▁`` (U+2581) replaced by a space; byte-fallback pieces
  ``<0xAB>`` are the byte 0xAB; control pieces (``<s>``, ``</s>``) are empty.

The concatenated token bytes of a document equal the document's UTF-8 bytes for cnfmce, tiktoken
and byte-level BPE without a normalizer. They need not for tokenizers that normalise (Qwen's NFC),
add a dummy prefix space (SentencePiece) or drop characters; :func:`cnfmce.evaluate`
counts such documents and computes its byte-aligned metrics on the token bytes instead.
"""

from __future__ import annotations

import copy
import json
import os
import re
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

from .errors import require

__all__ = [
    "Encoder", "CnfmceEncoder", "TiktokenEncoder", "HFEncoder", "SentencePieceEncoder",
    "as_encoder", "load_encoder", "EncoderSpec",
]

EncoderSpec = Union[str, "os.PathLike[str]"]

_SP_SPACE = "\u2581"
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>\Z")


class Encoder:
    """The uniform wrapper returned by :func:`as_encoder` (see the module docstring).

    Subclasses implement :meth:`encode`, :meth:`decode`, :meth:`token_bytes`, :attr:`vocab_size`
    and :meth:`id_bound`; :meth:`encode_batch` and :meth:`token_table` have generic versions.
    """

    kind: str = "encoder"

    def __init__(self, name: str) -> None:
        self.name = name
        self._table: Optional[List[Optional[bytes]]] = None

    def encode(self, text: str) -> List[int]:
        """Token ids of ``text`` (no special tokens added)."""
        raise NotImplementedError

    def encode_batch(self, texts: Sequence[str]) -> List[List[int]]:
        """:meth:`encode` on each text (the library's batch API where it has one)."""
        return [self.encode(t) for t in texts]

    def decode(self, ids: Sequence[int]) -> str:
        """The library's own decoding of ``ids`` to text."""
        raise NotImplementedError

    def token_bytes(self, token_id: int) -> bytes:
        """The exact bytes of token ``token_id``; raises ``KeyError`` for an unknown id."""
        raise NotImplementedError

    @property
    def vocab_size(self) -> int:
        """The declared vocabulary size: ids in use, special and added tokens included."""
        raise NotImplementedError

    def id_bound(self) -> int:
        """One past the largest id in use."""
        raise NotImplementedError

    def token_table(self) -> List[Optional[bytes]]:
        """``table[i]`` is :meth:`token_bytes` of ``i``, or None where ``i`` is not an id;
        built once and cached (without a lock: a process forked while another thread held one
        would wait for it forever; two threads may both build it, one table is kept)."""
        table = self._table
        if table is None:
            table = self._table = self._build_table()
        return table

    def _build_table(self) -> List[Optional[bytes]]:
        table: List[Optional[bytes]] = []
        for i in range(self.id_bound()):
            try:
                table.append(self.token_bytes(i))
            except (KeyError, ValueError, IndexError):
                table.append(None)
        return table

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, vocab_size={self.vocab_size})"


# --- cnfmce ---------------------------------------------------------------------------------------

class CnfmceEncoder(Encoder):
    """A :class:`cnfmce.Tokenizer`: MCE or FMM, special-token text encoded as ordinary text."""

    kind = "cnfmce"

    def __init__(self, tokenizer: Any, name: Optional[str] = None) -> None:
        super().__init__(name or f"cnfmce:{tokenizer.algorithm}")
        self.tokenizer = tokenizer

    def encode(self, text: str) -> List[int]:
        return self.tokenizer.encode(text)

    def encode_batch(self, texts: Sequence[str]) -> List[List[int]]:
        return self.tokenizer.encode_batch(list(texts))

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(ids)

    def token_bytes(self, token_id: int) -> bytes:
        return self.tokenizer.id_to_token(token_id)

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    def id_bound(self) -> int:
        return self.tokenizer.n_vocab

    def _build_table(self) -> List[Optional[bytes]]:
        table: List[Optional[bytes]] = [None] * self.id_bound()
        for i, b in self.tokenizer.token_bytes().items():
            table[i] = b
        for s, i in self.tokenizer.special_tokens.items():
            table[i] = s.encode("utf-8")
        return table


# --- tiktoken -------------------------------------------------------------------------------------

class TiktokenEncoder(Encoder):
    """A ``tiktoken.Encoding``, encoded with ``encode_ordinary`` (special-token text is ordinary
    text, as in :meth:`cnfmce.Tokenizer.encode`)."""

    kind = "tiktoken"

    def __init__(self, encoding: Any, name: Optional[str] = None) -> None:
        super().__init__(name or f"tiktoken:{encoding.name}")
        self.encoding = encoding

    def encode(self, text: str) -> List[int]:
        return self.encoding.encode_ordinary(text)

    def encode_batch(self, texts: Sequence[str]) -> List[List[int]]:
        return self.encoding.encode_ordinary_batch(list(texts))

    def decode(self, ids: Sequence[int]) -> str:
        return self.encoding.decode(list(ids))

    def token_bytes(self, token_id: int) -> bytes:
        return self.encoding.decode_single_token_bytes(token_id)

    @property
    def vocab_size(self) -> int:
        # ids actually assigned: o200k_base has 199,998 ranks and 2 special tokens (200,000),
        # while n_vocab (= max id + 1) is 200,019 because of unassigned ids.
        return len(self.encoding.token_byte_values()) + len(self.encoding.special_tokens_set)

    def id_bound(self) -> int:
        return self.encoding.max_token_value + 1


# --- Hugging Face tokenizers ----------------------------------------------------------------------

def _has_type(node: Any, name: str) -> bool:
    """True when a tokenizer.json component (possibly a Sequence) has a part of type ``name``."""
    if isinstance(node, dict):
        if node.get("type") == name:
            return True
        return any(_has_type(v, name) for k, v in node.items()
                   if k in ("pretokenizers", "decoders", "normalizers", "processors"))
    if isinstance(node, list):
        return any(_has_type(v, name) for v in node)
    return False


def _sp_piece_bytes(piece: str) -> bytes:
    """SentencePiece convention: ``<0xAB>`` is the byte 0xAB, ``▁`` is a space."""
    m = _BYTE_PIECE.match(piece)
    if m:
        return bytes([int(m.group(1), 16)])
    return piece.replace(_SP_SPACE, " ").encode("utf-8")


class HFEncoder(Encoder):
    """A Hugging Face ``tokenizers.Tokenizer`` with its own pipeline, ``add_special_tokens=False``.

    Truncation and padding, when the object has them enabled, are turned off on a private copy
    (they would change the token counts).
    """

    kind = "hf"

    def __init__(self, tokenizer: Any, name: Optional[str] = None) -> None:
        super().__init__(name or "hf")
        doc = json.loads(tokenizer.to_str())
        if tokenizer.truncation is not None or tokenizer.padding is not None:
            from tokenizers import Tokenizer as _HFTokenizer
            tokenizer = _HFTokenizer.from_str(tokenizer.to_str())
            tokenizer.no_truncation()
            tokenizer.no_padding()
        self.tokenizer = tokenizer
        model = doc.get("model") or {}
        self.model_type: Optional[str] = model.get("type")
        self.byte_level: bool = _has_type(doc.get("pre_tokenizer"), "ByteLevel") or \
            _has_type(doc.get("decoder"), "ByteLevel")
        self.continuing_prefix: Optional[str] = model.get("continuing_subword_prefix") or \
            (None if self.model_type != "WordPiece" else "##")
        self._added: Dict[int, bytes] = {
            i: t.content.encode("utf-8") for i, t in tokenizer.get_added_tokens_decoder().items()}
        self._inverse: Optional[Dict[str, int]] = None
        if self.byte_level:
            from .formats import unicode_to_bytes
            self._inverse = unicode_to_bytes()

    def encode(self, text: str) -> List[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> List[List[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def _string_bytes(self, s: str) -> bytes:
        if self._inverse is not None:
            try:
                return bytes(self._inverse[c] for c in s)
            except KeyError:  # not in the byte alphabet: a raw (added or special) entry
                return s.encode("utf-8")
        if self.continuing_prefix and s.startswith(self.continuing_prefix) and \
                len(s) > len(self.continuing_prefix):
            s = s[len(self.continuing_prefix):]
        return _sp_piece_bytes(s)

    def token_bytes(self, token_id: int) -> bytes:
        if token_id in self._added:
            return self._added[token_id]
        s = self.tokenizer.id_to_token(token_id)
        if s is None:
            raise KeyError(f"unknown token id {token_id}")
        return self._string_bytes(s)

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def id_bound(self) -> int:
        vocab = self.tokenizer.get_vocab(with_added_tokens=True)
        return max(vocab.values()) + 1 if vocab else 0

    def _build_table(self) -> List[Optional[bytes]]:
        vocab = self.tokenizer.get_vocab(with_added_tokens=True)
        table: List[Optional[bytes]] = [None] * (max(vocab.values()) + 1 if vocab else 0)
        for s, i in vocab.items():
            table[i] = self._added[i] if i in self._added else self._string_bytes(s)
        return table


# --- SentencePiece --------------------------------------------------------------------------------

class SentencePieceEncoder(Encoder):
    """A ``sentencepiece.SentencePieceProcessor`` with its own normalisation and dummy prefix."""

    kind = "sentencepiece"

    def __init__(self, processor: Any, name: Optional[str] = None) -> None:
        super().__init__(name or "sentencepiece")
        self.processor = processor

    def encode(self, text: str) -> List[int]:
        return list(self.processor.encode(text))

    def encode_batch(self, texts: Sequence[str]) -> List[List[int]]:
        return [list(x) for x in self.processor.encode(list(texts))]

    def decode(self, ids: Sequence[int]) -> str:
        return self.processor.decode(list(ids))

    def token_bytes(self, token_id: int) -> bytes:
        sp = self.processor
        if not 0 <= token_id < sp.get_piece_size():
            raise KeyError(f"unknown token id {token_id}")
        if sp.is_byte(token_id):
            return _sp_piece_bytes(sp.id_to_piece(token_id))
        if sp.is_control(token_id):
            return b""
        return sp.id_to_piece(token_id).replace(_SP_SPACE, " ").encode("utf-8")

    @property
    def vocab_size(self) -> int:
        return self.processor.get_piece_size()

    def id_bound(self) -> int:
        return self.processor.get_piece_size()


# --- construction ---------------------------------------------------------------------------------

def _module_of(obj: Any) -> str:
    return type(obj).__module__.split(".")[0]


def as_encoder(obj: Any, name: Optional[str] = None) -> Encoder:
    """Wraps ``obj`` in an :class:`Encoder` (returned unchanged when it already is one).

    Accepts a :class:`cnfmce.Tokenizer` (or its ``transformers`` form, :class:`cnfmce.hf.CnfmceTokenizer`),
    a ``tiktoken.Encoding``, a ``tokenizers.Tokenizer`` (or an object with a ``backend_tokenizer``,
    as ``transformers`` fast tokenizers have), a
    ``sentencepiece.SentencePieceProcessor``, or a spec string / path for :func:`load_encoder`.
    ``name`` overrides the label (an :class:`Encoder` passed in is copied, not renamed).
    """
    from .tokenizer import Tokenizer

    if isinstance(obj, Encoder):
        if name and name != obj.name:
            obj = copy.copy(obj)  # a relabelled view; the original keeps its name
            obj.name = name
        return obj
    if isinstance(obj, Tokenizer):
        return CnfmceEncoder(obj, name)
    if isinstance(getattr(type(obj), "cnfmce_tokenizer", None), property):  # cnfmce.hf.CnfmceTokenizer
        return CnfmceEncoder(obj.cnfmce_tokenizer, name or getattr(obj, "name_or_path", None) or None)
    if isinstance(obj, (str, os.PathLike)):
        return load_encoder(obj, name=name)
    mod = _module_of(obj)
    if mod == "tiktoken" and hasattr(obj, "decode_single_token_bytes"):
        return TiktokenEncoder(obj, name)
    if mod == "tokenizers" and hasattr(obj, "get_added_tokens_decoder"):
        return HFEncoder(obj, name)
    if hasattr(obj, "backend_tokenizer"):
        return HFEncoder(obj.backend_tokenizer, name or getattr(obj, "name_or_path", None))
    if mod == "sentencepiece" and hasattr(obj, "get_piece_size"):
        return SentencePieceEncoder(obj, name)
    raise TypeError(f"cannot evaluate a {type(obj).__module__}.{type(obj).__name__}: expected a "
                    "cnfmce.Tokenizer, tiktoken.Encoding, tokenizers.Tokenizer, "
                    "sentencepiece.SentencePieceProcessor, or a tokenizer spec/path")


_TIKTOKEN_PATCH = threading.Lock()
if hasattr(os, "register_at_fork"):  # a fork waits for the patch to end (a child never inherits it held)
    os.register_at_fork(before=_TIKTOKEN_PATCH.acquire, after_in_parent=_TIKTOKEN_PATCH.release,
                        after_in_child=_TIKTOKEN_PATCH.release)


def _tiktoken_encoding(name: str, path: Optional[Path]) -> Any:
    """tiktoken's definition of the encoding ``name`` (regex and special tokens), with the ranks
    read from ``path`` when given (no download), else ``tiktoken.get_encoding(name)``."""
    tiktoken = require("tiktoken", "eval", f"tiktoken:{name}")
    if path is None:
        try:
            return tiktoken.get_encoding(name)
        except ValueError:
            raise
        except Exception as e:  # tiktoken downloads the ranks (requests/blobfile errors)
            raise OSError(
                f"tiktoken could not load the encoding {name!r}: no {name}.tiktoken file in "
                f"vocab_dir or $CNFMCE_VOCABS, and tiktoken's own download/cache failed "
                f"({type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}). Put "
                f"{name}.tiktoken in a directory and pass it as vocab_dir (or set CNFMCE_VOCABS), "
                f"or give the file as tiktoken:PATH") from e
    from tiktoken_ext import openai_public

    from .formats import parse_tiktoken
    ctor = getattr(openai_public, "ENCODING_CONSTRUCTORS", {}).get(name)
    if ctor is None:
        raise ValueError(f"tiktoken has no built-in encoding named {name!r} (its regex and special "
                         f"tokens are needed); known: "
                         f"{sorted(getattr(openai_public, 'ENCODING_CONSTRUCTORS', {}))}")
    ids, toks = parse_tiktoken(path)
    ranks = dict(zip(toks, ids))
    with _TIKTOKEN_PATCH:  # the constructor calls this module-level loader with a URL
        real = openai_public.load_tiktoken_bpe
        openai_public.load_tiktoken_bpe = lambda *_a, **_k: ranks
        try:
            spec = ctor()
        finally:
            openai_public.load_tiktoken_bpe = real
    return tiktoken.Encoding(**spec)


def _vocab_dirs(vocab_dir: Optional[EncoderSpec]) -> List[Path]:
    dirs = []
    if vocab_dir:
        dirs.append(Path(vocab_dir))
    env = os.environ.get("CNFMCE_VOCABS")
    if env:
        dirs.append(Path(env))
    return dirs


def _file_kind(path: Path) -> str:
    """``"tiktoken"``, ``"sentencepiece"``, ``"cnfmce"`` or ``"hf"`` for a tokenizer file
    (:func:`cnfmce.formats.tokenizer_file_kind`)."""
    from .formats import tokenizer_file_kind
    return tokenizer_file_kind(path)


def _strip_ext(name: str) -> str:
    for ext in (".gz", ".json", ".tiktoken", ".model"):
        if name.lower().endswith(ext):
            name = name[: -len(ext)]
    return name


def _load_cnfmce(path: Path, algorithm: Optional[str]) -> Any:
    from .tokenizer import Tokenizer
    kind = _file_kind(path)
    opts: Dict[str, Any] = {}
    if kind == "tiktoken":
        return Tokenizer.from_tiktoken(path, algorithm=algorithm or "mce")
    if kind == "hf":
        return Tokenizer.from_hf(path, algorithm=algorithm or "mce")
    if kind == "sentencepiece":
        raise ValueError(f"{path}: a SentencePiece model cannot be loaded as a cnfmce tokenizer")
    if algorithm:
        opts["algorithm"] = algorithm
    return Tokenizer.load(path, **opts)


def _tokenizer_file(path: Path) -> None:
    """A named tokenizer file must exist (checked before the optional package is needed)."""
    if not path.exists():
        raise FileNotFoundError(f"no such tokenizer file: {path}")
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory, not a tokenizer file")


def _hf_from_file(path: Path) -> Any:
    _tokenizer_file(path)
    _HFTokenizer = require("tokenizers", "eval", f"hf:{path}").Tokenizer

    from .formats import read_bytes
    return _HFTokenizer.from_str(read_bytes(path).decode("utf-8"))


def _sp_from_file(path: Path) -> Any:
    _tokenizer_file(path)
    spm = require("sentencepiece", "eval", f"sp:{path}")
    return spm.SentencePieceProcessor(model_file=str(path))


def load_encoder(spec: EncoderSpec, *, name: Optional[str] = None,
                 vocab_dir: Optional[EncoderSpec] = None) -> Encoder:
    """An :class:`Encoder` from a spec string or path.

    Specs:

    ``tiktoken:NAME``
        tiktoken's encoding ``NAME`` (e.g. ``o200k_base``) with its own regex and BPE. The ranks
        come from ``NAME.tiktoken`` (or ``.tiktoken.gz``) in ``vocab_dir`` or ``$CNFMCE_VOCABS``
        when present (no download), else from ``tiktoken.get_encoding`` (an ``OSError`` saying so
        when that fails, e.g. with no network).
    ``tiktoken:PATH``
        the same with the ranks read from ``PATH``; the file name (``o200k_base.tiktoken``)
        names the encoding whose regex and special tokens are used.
    ``hf:PATH``
        a Hugging Face ``tokenizer.json`` (``.gz`` accepted) run by ``tokenizers``.
    ``sp:PATH``
        a SentencePiece ``.model`` file.
    ``mce:PATH``, ``fmm:PATH``, ``cnfmce:PATH``
        a cnfmce :class:`~cnfmce.Tokenizer` over the vocabulary in ``PATH`` (a cnfmce file, a
        ``.tiktoken`` file or a byte-level BPE ``tokenizer.json``) with that algorithm
        (``cnfmce:``: the file's own, MCE for foreign files).
    a bare ``PATH``
        ``.model``: SentencePiece; ``.tiktoken``: cnfmce MCE over the ranks (a bare rank file has
        no regex to run tiktoken with); a cnfmce file: that tokenizer; any other
        ``tokenizer.json``: Hugging Face ``tokenizers``.
    """
    s = os.fspath(spec)
    prefix, sep, rest = s.partition(":")
    prefix = prefix.lower()
    if sep and prefix in ("tiktoken", "hf", "sp", "sentencepiece", "mce", "fmm", "cnfmce") and rest:
        if prefix == "tiktoken":
            p = Path(rest)
            if not p.exists() and (os.sep in rest or "/" in rest or rest.lower().endswith(
                    (".tiktoken", ".tiktoken.gz"))):  # a path, not an encoding's name
                raise FileNotFoundError(f"no such tokenizer file: {rest}")
            if p.is_file():
                enc_name = _strip_ext(p.name)
                return TiktokenEncoder(_tiktoken_encoding(enc_name, p), name or f"tiktoken:{enc_name}")
            local = None
            for d in _vocab_dirs(vocab_dir):
                for ext in (".tiktoken", ".tiktoken.gz"):
                    if (d / (rest + ext)).is_file():
                        local = d / (rest + ext)
                        break
                if local:
                    break
            return TiktokenEncoder(_tiktoken_encoding(rest, local), name or f"tiktoken:{rest}")
        path = Path(rest)
        if prefix == "hf":
            return HFEncoder(_hf_from_file(path), name or f"hf:{_strip_ext(path.name)}")
        if prefix in ("sp", "sentencepiece"):
            return SentencePieceEncoder(_sp_from_file(path), name or f"sp:{_strip_ext(path.name)}")
        algorithm = None if prefix == "cnfmce" else prefix
        tok = _load_cnfmce(path, algorithm)
        return CnfmceEncoder(tok, name or f"{tok.algorithm}:{_strip_ext(path.name)}")
    path = Path(s)
    if not path.exists():
        raise FileNotFoundError(f"no such tokenizer file: {s} (or use a spec such as "
                                "tiktoken:o200k_base, hf:PATH, sp:PATH, mce:PATH, fmm:PATH)")
    kind = _file_kind(path)
    base = _strip_ext(path.name)
    if kind == "sentencepiece":
        return SentencePieceEncoder(_sp_from_file(path), name or f"sp:{base}")
    if kind == "hf":
        return HFEncoder(_hf_from_file(path), name or f"hf:{base}")
    tok = _load_cnfmce(path, None)
    return CnfmceEncoder(tok, name or f"{tok.algorithm}:{base}")

