"""The :class:`Tokenizer`: a byte vocabulary, special tokens and an encoding algorithm.

Encoding runs in the Rust core (``cnfmce._core``): min-cost encoding (MCE) by default, forward
maximum matching (FMM) on request. See ``docs/spec.md`` section 2 for the exact definition.
"""

from __future__ import annotations

import numbers
import os
import re
import threading
from typing import (TYPE_CHECKING, AbstractSet, Any, Collection, Dict, Iterable, List, Literal,
                    Mapping, Optional, Sequence, Tuple, Union, overload)

from . import _core
from . import formats

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
from .errors import TokenizerFileError, UnknownIdError

__all__ = ["Tokenizer", "AllowedSpecial", "DisallowedSpecial", "useful_threads", "max_threads"]

AllowedSpecial = Union[Literal["all"], AbstractSet[str], Collection[str]]
SpecialTokens = Union[Mapping[str, int], Sequence[str], None]

DisallowedSpecial = Union[Literal["all"], AbstractSet[str], Collection[str]]

def max_threads() -> int:
    """The most worker threads an encoding or training call starts: four times the CPUs this
    process may use, at least 8 (more threads only add scheduling and memory); a larger
    ``num_threads`` is lowered to it."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return max(8, 4 * cpus)


def useful_threads(num_threads: Any, items: Optional[int] = None) -> Optional[int]:
    """Checks ``num_threads`` (None: all cores; else a positive int) and lowers it to what can
    help: at most :func:`max_threads`, and at most ``items`` (the number of texts) when given."""
    if num_threads is None:
        return None
    if type(num_threads) is int and 1 <= num_threads <= 8:
        # max_threads() is at least 8 (and asks the OS each time): the common case costs nothing.
        n = num_threads
    elif isinstance(num_threads, bool) or not isinstance(num_threads, numbers.Integral) or num_threads < 1:
        raise ValueError(f"num_threads must be a positive int or None, got {num_threads!r}")
    else:
        n = min(int(num_threads), max_threads())
    if items is not None and n > items:
        # (comparisons, not min/max: this runs on every call of encode_batch)
        n = items if items > 1 else 1
    return n


_np: Any = None
_np_lock = threading.Lock()


def _numpy() -> Any:
    """numpy, imported on first use (``import cnfmce`` does not import it). The import runs under
    a lock that ``os.fork`` takes first (the at-fork handlers below): a child forked while
    another thread was importing numpy inherited numpy's import lock held by a thread it does
    not have, and its own first use of numpy waited forever. Forking now waits for the import."""
    global _np
    if _np is None:
        with _np_lock:
            import numpy
            _np = numpy
    return _np


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(before=_np_lock.acquire, after_in_parent=_np_lock.release,
                        after_in_child=_np_lock.release)


DEFAULT_BOUNDARY_PENALTY: float = _core.DEFAULT_BOUNDARY_PENALTY  # λ, written once in the core
_OPTION_NAMES = ("algorithm", "boundary_penalty", "token_preference")


def _check_options(algorithm: Any, boundary_penalty: Any, token_preference: Any) -> "_core.Options":
    """The three options as one checked value (the core checks types and values, once)."""
    return _core.Options(algorithm, boundary_penalty, token_preference)


def _options_dict(opts: "_core.Options") -> Dict[str, Any]:
    return {name: getattr(opts, name) for name in _OPTION_NAMES}



def _special_pairs(special_tokens: SpecialTokens, next_id: int) -> List[Tuple[bytes, int]]:
    """(bytes, id) pairs from a mapping str -> id, or a sequence of str given ids from next_id."""
    if special_tokens is None:
        return []
    if isinstance(special_tokens, str):
        raise TypeError("special_tokens must be a mapping or a sequence of strings, not a string")
    if isinstance(special_tokens, Mapping):
        items = list(special_tokens.items())
    else:
        items = [(s, next_id + k) for k, s in enumerate(special_tokens)]
    out = []
    for s, i in items:
        if not isinstance(s, str):
            raise TypeError(f"special tokens must be str, got {type(s).__name__}")
        if not s:
            raise ValueError("a special token is empty")
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < formats.MAX_ID:
            raise ValueError(f"special token {s!r} has a bad id {i!r}")
        out.append((s.encode("utf-8"), i))
    return out


class Tokenizer:
    """A tokenizer over a byte vocabulary.

    Build one with :meth:`from_tokens`, :meth:`from_tiktoken`, :meth:`from_hf`, :meth:`load` or
    :func:`cnfmce.train`. Every constructor takes the options ``algorithm`` (``"mce"`` or
    ``"fmm"``), ``boundary_penalty`` (λ, default 0.05) and ``token_preference`` (ε on or off),
    which :meth:`save` keeps and :meth:`load` restores.

    Tokenizers are immutable and thread-safe; they pickle (through :meth:`to_bytes`).
    """

    __slots__ = ("_core", "_specials", "_matchers", "metadata")

    def __init__(self, core: "_core.CoreTokenizer", metadata: Optional[Dict[str, Any]] = None):
        """Wraps a core tokenizer; use the ``from_*`` constructors instead."""
        if not isinstance(core, _core.CoreTokenizer):
            raise TypeError("use Tokenizer.from_tokens / from_tiktoken / from_hf / load or cnfmce.train")
        self._core = core
        self._specials: Dict[str, int] = {b.decode("utf-8"): i for b, i in core.specials()}
        self._matchers: Dict[Any, Any] = {}
        self.metadata: Dict[str, Any] = dict(metadata or {})

    # --- constructors -------------------------------------------------------------------------

    @classmethod
    def _build(cls, tokens: Any, ids: Optional[List[int]], specials: List[Tuple[bytes, int]],
               options: "_core.Options", metadata: Optional[Dict[str, Any]] = None) -> "Tokenizer":
        if isinstance(tokens, formats.PackedTokens):
            core = _core.CoreTokenizer.from_packed(tokens.data, tokens.lengths, tokens.ids, specials,
                                                   options)
        else:
            core = _core.CoreTokenizer(tokens, ids, specials, options)
        return cls(core, metadata)

    @classmethod
    def from_tokens(cls, tokens: Sequence[bytes], *, special_tokens: SpecialTokens = None,
                    algorithm: str = "mce", boundary_penalty: float = DEFAULT_BOUNDARY_PENALTY,
                    token_preference: bool = True) -> "Tokenizer":
        """A tokenizer whose token ``i`` is ``tokens[i]``.

        ``tokens`` must hold every single byte ``bytes([b])`` and no duplicates. ``special_tokens``
        is a mapping ``str -> id`` or a list of strings that get the ids after the last token.
        """
        if isinstance(tokens, (str, bytes)) or not isinstance(tokens, Iterable):
            raise TypeError("tokens must be a list of bytes")
        toks = list(tokens)
        for k, t in enumerate(toks):
            if not isinstance(t, bytes):
                raise TypeError(f"token {k} is {type(t).__name__}, expected bytes")
        opts = _check_options(algorithm, boundary_penalty, token_preference)
        return cls._build(toks, None, _special_pairs(special_tokens, len(toks)), opts)

    @classmethod
    def from_tiktoken(cls, path: "os.PathLike[str] | str", *, special_tokens: SpecialTokens = None,
                      algorithm: str = "mce", boundary_penalty: float = DEFAULT_BOUNDARY_PENALTY,
                      token_preference: bool = True) -> "Tokenizer":
        """Loads a tiktoken vocabulary file (``<base64 token> <rank>`` per line; rank = id).

        tiktoken files do not list special tokens; pass them as ``special_tokens`` (e.g.
        ``{"<|endoftext|>": 199999}`` for o200k_base). Gzip-compressed files are accepted.
        """
        opts = _check_options(algorithm, boundary_penalty, token_preference)
        ids, toks = formats.parse_tiktoken(path)
        return cls._build(toks, ids, _special_pairs(special_tokens, max(ids) + 1), opts)

    @classmethod
    def from_hf(cls, path: "os.PathLike[str] | str", *, algorithm: str = "mce",
                boundary_penalty: float = DEFAULT_BOUNDARY_PENALTY, token_preference: bool = True) -> "Tokenizer":
        """Loads the vocabulary of a Hugging Face ``tokenizer.json`` (byte-level BPE).

        ``model.vocab`` gives the ids (GPT-2 byte-to-unicode alphabet); ``added_tokens`` marked
        special become special tokens, other added tokens regular tokens (an added token whose
        text is already a vocabulary token under another id becomes a special token, so that both
        ids decode). Merges, normalizers and
        pre-tokenizers are not used: MCE needs only the vocabulary. Gzip-compressed files are
        accepted.
        """
        opts = _check_options(algorithm, boundary_penalty, token_preference)
        ids, toks, specials = formats.parse_hf(path)
        return cls._build(toks, ids, _special_pairs(specials, 0), opts)

    @classmethod
    def load(cls, path: "os.PathLike[str] | str", *, algorithm: Optional[str] = None,
             boundary_penalty: Optional[float] = None,
             token_preference: Optional[bool] = None) -> "Tokenizer":
        """Reads a file written by :meth:`save` (JSON, gzip-compressed when it ends in ``.gz``).

        The saved options are restored; options given here override them.
        """
        return cls._from_native(formats.parse_native(path), os.fspath(path),
                                algorithm, boundary_penalty, token_preference)

    @classmethod
    def _from_native(cls, parsed: Tuple[Any, ...], path: str, algorithm: Optional[str] = None,
                     boundary_penalty: Optional[float] = None,
                     token_preference: Optional[bool] = None) -> "Tokenizer":
        ids, toks, specials, options, metadata = parsed
        merged = _options_dict(_core.Options.default())
        merged.update({k: v for k, v in options.items() if k in merged})
        for k, v in (("algorithm", algorithm), ("boundary_penalty", boundary_penalty),
                     ("token_preference", token_preference)):
            if v is not None:
                merged[k] = v
        try:
            opts = _check_options(**merged)
        except (TypeError, ValueError) as e:
            raise TokenizerFileError(f"{path}: bad options ({e})") from None
        try:
            return cls._build(toks, ids, _special_pairs(specials, 0), opts, metadata)
        except ValueError as e:
            raise TokenizerFileError(f"{path}: {e}") from None

    def with_options(self, *, algorithm: Optional[str] = None, boundary_penalty: Optional[float] = None,
                     token_preference: Optional[bool] = None) -> "Tokenizer":
        """A tokenizer over the same vocabulary with some options changed."""
        opts = _check_options(algorithm if algorithm is not None else self.algorithm,
                               self.boundary_penalty if boundary_penalty is None else boundary_penalty,
                               self.token_preference if token_preference is None else token_preference)
        core = self._core.with_options(opts)
        return Tokenizer(core, self.metadata)

    # --- saving -------------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The tokenizer in the JSON file format of :mod:`cnfmce.formats` (uncompressed)."""
        table: formats.TokenTable
        if self._core.num_regular > formats.PACK_ABOVE:
            table = formats.PackedTokens(*self._core.packed())
        else:
            table = self._core.tokens()
        return formats.dump_native(table, self._specials, self.options, self.metadata)

    @classmethod
    def from_bytes(cls, data: bytes) -> "Tokenizer":
        """The inverse of :meth:`to_bytes`."""
        return cls._from_native(formats.parse_native_bytes(data), "<bytes>")

    def save(self, path: "os.PathLike[str] | str") -> None:
        """Writes the vocabulary, special tokens, options and metadata to one versioned JSON file
        (gzip-compressed when ``path`` ends in ``.gz``). The write is atomic."""
        formats.write_bytes_atomic(path, self.to_bytes())

    def __getstate__(self) -> bytes:
        return self.to_bytes()

    def __setstate__(self, state: bytes) -> None:
        other = Tokenizer.from_bytes(state)
        self._core = other._core
        self._specials = other._specials
        self._matchers = {}
        self.metadata = other.metadata

    # --- encoding -----------------------------------------------------------------------------

    def _allowed_key(self, allowed_special: AllowedSpecial) -> Any:
        """``"all"`` or a frozenset of special-token strings (checked)."""
        if isinstance(allowed_special, str):
            if allowed_special == "all":
                return "all"
            raise ValueError('allowed_special must be "all" or a set of special-token strings')
        try:
            key = frozenset(allowed_special)
        except TypeError:
            raise TypeError('allowed_special must be "all" or a set of strings') from None
        return key

    def _matcher(self, allowed_special: AllowedSpecial) -> Any:
        if type(allowed_special) is frozenset and not allowed_special:
            return None  # the default: no special token allowed (what the general path gives)
        key = self._allowed_key(allowed_special)
        if not key:
            return None
        m = self._matchers.get(key)
        if m is None:
            if key == "all":
                if not self._specials:
                    return None
                m = self._core.matcher(None)
            else:
                unknown = [s for s in key if s not in self._specials]
                if unknown:
                    names = ", ".join(repr(u) for u in sorted(unknown, key=repr))
                    raise ValueError(f"not special tokens of this tokenizer: {names}")
                m = self._core.matcher([self._specials[s] for s in key])
            self._matchers[key] = m
        return m

    def _disallowed(self, allowed_special: AllowedSpecial, disallowed_special: DisallowedSpecial
                    ) -> Optional[Tuple["re.Pattern[str]", "re.Pattern[bytes]"]]:
        """The patterns (str, bytes) of the special-token texts that ``disallowed_special``
        forbids, as tiktoken computes them (``"all"``: every special token not in
        ``allowed_special``), or None when nothing is forbidden."""
        if isinstance(disallowed_special, str):
            if disallowed_special != "all":
                raise ValueError('disallowed_special must be "all" or a collection of strings '
                                 '(() encodes special-token text as ordinary text)')
            allowed = self._allowed_key(allowed_special)
            if allowed == "all" or not self._specials:
                return None
            forbidden = frozenset(self._specials) - allowed
        else:
            try:
                forbidden = frozenset(disallowed_special)
            except TypeError:
                raise TypeError('disallowed_special must be "all" or a collection of strings, '
                                f"got {type(disallowed_special).__name__}") from None
            for t in forbidden:
                if not isinstance(t, str) or not t:
                    raise TypeError(f"disallowed_special holds {t!r}; expected non-empty strings")
        if not forbidden:
            return None
        key = ("disallowed", forbidden)
        pats = self._matchers.get(key)
        if pats is None:
            alts = sorted(forbidden, key=lambda t: (-len(t), t))  # longest first at a position
            pats = (re.compile("|".join(map(re.escape, alts))),
                    re.compile(b"|".join(re.escape(t.encode("utf-8", "surrogatepass")) for t in alts)))
            self._matchers[key] = pats
        return pats

    @staticmethod
    def _raise_disallowed(found: str, where: str) -> None:
        raise ValueError(
            f"{where} contains the special token {found!r}, which disallowed_special "
            "forbids: pass it in allowed_special to encode it as that special token, or "
            "disallowed_special=() to encode it as ordinary text")

    def encode(self, text: str, *, allowed_special: AllowedSpecial = frozenset(),
               disallowed_special: DisallowedSpecial = ()) -> List[int]:
        """Encodes ``text`` to token ids.

        Special tokens in the text are matched only when allowed (``"all"`` or a set of their
        strings); otherwise their text is encoded like any other text. ``disallowed_special``
        works as in tiktoken, with a different default: ``"all"`` raises ``ValueError`` when the
        text holds a special token's text that ``allowed_special`` does not allow, a set of
        strings raises when one of them occurs, and ``()`` (the default here, SPEC section 1;
        tiktoken's default is ``"all"``) never raises.
        """
        if not isinstance(text, str):
            raise TypeError(f"encode takes str, got {type(text).__name__} (use encode_bytes for bytes)")
        matcher = self._matcher(allowed_special)
        pats = self._disallowed(allowed_special, disallowed_special) if disallowed_special else None
        if pats is not None:
            m = pats[0].search(text)
            if m:
                self._raise_disallowed(m.group(), "the text")
        return self._core.encode(text, matcher)

    def encode_ordinary(self, text: str) -> List[int]:
        """Encodes ``text`` treating special-token text as ordinary text."""
        return self.encode(text)

    def encode_bytes(self, data: Union[bytes, bytearray, memoryview], *,
                     allowed_special: AllowedSpecial = frozenset(),
                     disallowed_special: DisallowedSpecial = ()) -> List[int]:
        """Encodes arbitrary bytes (invalid UTF-8 included); ``decode_bytes`` gives them back.
        ``allowed_special`` and ``disallowed_special`` as in :meth:`encode` (matched on the
        special tokens' UTF-8 bytes)."""
        if isinstance(data, (bytearray, memoryview)):
            data = bytes(data)
        if not isinstance(data, bytes):
            raise TypeError(f"encode_bytes takes bytes, got {type(data).__name__}")
        matcher = self._matcher(allowed_special)
        pats = self._disallowed(allowed_special, disallowed_special) if disallowed_special else None
        if pats is not None:
            m = pats[1].search(data)
            if m:
                self._raise_disallowed(m.group().decode("utf-8", "replace"), "the data")
        return self._core.encode_bytes(data, matcher)

    @overload
    def encode_batch(self, texts: Sequence[str], *, allowed_special: AllowedSpecial = ...,
                     disallowed_special: DisallowedSpecial = ...,
                     num_threads: Optional[int] = ..., return_numpy: Literal[False] = ...
                     ) -> List[List[int]]: ...

    @overload
    def encode_batch(self, texts: Sequence[str], *, allowed_special: AllowedSpecial = ...,
                     disallowed_special: DisallowedSpecial = ...,
                     num_threads: Optional[int] = ..., return_numpy: Literal[True]
                     ) -> Tuple["np.ndarray", "np.ndarray"]: ...

    def encode_batch(self, texts: Sequence[str], *, allowed_special: AllowedSpecial = frozenset(),
                     disallowed_special: DisallowedSpecial = (),
                     num_threads: Optional[int] = None, return_numpy: bool = False) -> Any:
        """Encodes many texts in parallel (all cores, or ``num_threads``); equal to ``encode`` on
        each text. ``num_threads`` above what can help (:func:`useful_threads`: the number of
        texts, and four times the CPUs) is lowered to it; ``allowed_special`` and
        ``disallowed_special`` as in :meth:`encode`.

        With ``return_numpy=True`` the result is ``(ids, starts)``: one flat ``uint32`` numpy
        array of all ids and an ``int64`` array of ``len(texts) + 1`` starts, text ``k``'s ids
        being ``ids[starts[k]:starts[k + 1]]``. No Python int is created per token (the fast
        path for tokenizing corpora, see :func:`cnfmce.tokenize_corpus`); both arrays are
        writable and own their memory."""
        if isinstance(texts, (str, bytes)):
            raise TypeError("encode_batch takes a list of str, not a single string")
        texts = list(texts)
        for t in texts:
            if not isinstance(t, str):
                k = next(k for k, t in enumerate(texts) if not isinstance(t, str))
                raise TypeError(f"text {k} is {type(texts[k]).__name__}, expected str")
        threads = useful_threads(num_threads, len(texts))
        matcher = self._matcher(allowed_special)
        pats = self._disallowed(allowed_special, disallowed_special) if disallowed_special else None
        if pats is not None:
            for k, t in enumerate(texts):
                m = pats[0].search(t)
                if m:
                    self._raise_disallowed(m.group(), f"text {k}")
        if return_numpy:
            np = _numpy()
            ids, starts, _ = self._core.encode_batch_flat(texts, matcher, threads)
            return np.frombuffer(ids, dtype=np.uint32), np.frombuffer(starts, dtype=np.int64)
        return self._core.encode_batch(texts, matcher, threads)

    def encode_bytes_batch(self, items: Sequence[bytes], *, num_threads: Optional[int] = None
                           ) -> List[List[int]]:
        """``encode_bytes`` over many inputs in parallel."""
        items = [bytes(x) if isinstance(x, (bytearray, memoryview)) else x for x in items]
        for k, t in enumerate(items):
            if not isinstance(t, bytes):
                raise TypeError(f"item {k} is {type(t).__name__}, expected bytes")
        return self._core.encode_bytes_batch(items, None, useful_threads(num_threads, len(items)))

    def encode_with_offsets(self, text: str, *, allowed_special: AllowedSpecial = frozenset()
                            ) -> Tuple[List[int], List[Tuple[int, int]]]:
        """``encode(text)`` and each token's ``(start, end)`` character span in ``text``.

        ``text[start:end]`` is every character that holds one of the token's bytes: a token that
        starts or ends inside a character (part of an emoji or a CJK character) gets the span of
        the whole characters it touches, so two tokens splitting one character both get its span
        (as Hugging Face byte-level tokenizers do). Computed in the core, no decoding.
        """
        if not isinstance(text, str):
            raise TypeError(f"encode_with_offsets takes str, got {type(text).__name__} "
                            "(use encode_bytes_with_offsets for bytes)")
        return self._core.encode_with_offsets(text, self._matcher(allowed_special))

    def encode_bytes_with_offsets(self, data: Union[bytes, bytearray, memoryview], *,
                                  allowed_special: AllowedSpecial = frozenset()
                                  ) -> Tuple[List[int], List[Tuple[int, int]]]:
        """``encode_bytes(data)`` and each token's ``(start, end)`` byte span: token ``k`` is
        ``data[start:end]`` exactly (any bytes, invalid UTF-8 included)."""
        if isinstance(data, (bytearray, memoryview)):
            data = bytes(data)
        if not isinstance(data, bytes):
            raise TypeError(f"encode_bytes_with_offsets takes bytes, got {type(data).__name__}")
        return self._core.encode_bytes_with_offsets(data, self._matcher(allowed_special))

    def encode_batch_with_offsets(self, texts: Sequence[str], *,
                                  allowed_special: AllowedSpecial = frozenset(),
                                  num_threads: Optional[int] = None
                                  ) -> List[Tuple[List[int], List[Tuple[int, int]]]]:
        """:meth:`encode_with_offsets` of many texts in parallel: a list of ``(ids, offsets)``."""
        texts = self._check_texts(texts, num_threads)
        return self._core.encode_batch_with_offsets(texts, self._matcher(allowed_special),
                                                    useful_threads(num_threads, len(texts)))

    def encode_bytes_batch_with_offsets(self, items: Sequence[bytes], *,
                                        allowed_special: AllowedSpecial = frozenset(),
                                        num_threads: Optional[int] = None
                                        ) -> List[Tuple[List[int], List[Tuple[int, int]]]]:
        """:meth:`encode_bytes_with_offsets` of many inputs in parallel."""
        if isinstance(items, (str, bytes)):
            raise TypeError("encode_bytes_batch_with_offsets takes a list of bytes, not a single value")
        items = [bytes(x) if isinstance(x, (bytearray, memoryview)) else x for x in items]
        for k, t in enumerate(items):
            if not isinstance(t, bytes):
                raise TypeError(f"item {k} is {type(t).__name__}, expected bytes")
        num_threads = useful_threads(num_threads, len(items))
        return self._core.encode_bytes_batch_with_offsets(items, self._matcher(allowed_special),
                                                          num_threads)

    @staticmethod
    def _check_texts(texts: Sequence[str], num_threads: Optional[int]) -> List[str]:
        if isinstance(texts, (str, bytes)):
            raise TypeError("a batch is a list of str, not a single string")
        texts = list(texts)
        for k, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"text {k} is {type(t).__name__}, expected str")
        useful_threads(num_threads)  # checks it
        return texts

    # --- decoding -----------------------------------------------------------------------------

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes of the tokens ``ids``; raises :class:`UnknownIdError` on an unknown id."""
        return self._core.decode_bytes(ids)

    def decode(self, ids: Iterable[int], errors: str = "replace") -> str:
        """The text of ``ids``; invalid UTF-8 becomes U+FFFD (``errors="replace"``)."""
        return self._core.decode_bytes(ids).decode("utf-8", errors=errors)

    def decode_batch(self, batch: Iterable[Iterable[int]], errors: str = "replace") -> List[str]:
        """``decode`` over many sequences."""
        return [self.decode(ids, errors) for ids in batch]

    def id_to_token(self, i: int) -> bytes:
        """The bytes of token ``i`` (special tokens too); raises :class:`UnknownIdError`."""
        return self._core.id_to_token(i)

    def token_to_id(self, token: Union[bytes, str]) -> Optional[int]:
        """The id of ``token`` (bytes; a str is taken as its UTF-8 bytes), or None."""
        if isinstance(token, str):
            token = token.encode("utf-8")
        if isinstance(token, (bytearray, memoryview)):
            token = bytes(token)
        if not isinstance(token, bytes):
            raise TypeError(f"token must be bytes, got {type(token).__name__}")
        return self._core.token_to_id(token)

    # --- transformers ---------------------------------------------------------------------------

    def to_transformers(self, **kwargs: Any) -> Any:
        """This tokenizer as a ``transformers`` tokenizer (:class:`cnfmce.hf.CnfmceTokenizer`;
        needs ``pip install "cnfmce[hf]"``).

        Keyword arguments are the tokenizer's settings: ``bos_token``, ``eos_token``, ``pad_token``,
        ``unk_token``, ``extra_special_tokens`` (strings that are special tokens here keep their
        ids, new ones get the next free ids), ``add_bos_token`` / ``add_eos_token``,
        ``chat_template``, ``model_max_length``, ``padding_side``, ... ``save_pretrained(dir)``
        on the result writes a directory that ``transformers.AutoTokenizer.from_pretrained(dir,
        trust_remote_code=True)`` loads.
        """
        from .hf import CnfmceTokenizer
        return CnfmceTokenizer(tokenizer=self, **kwargs)

    # --- properties ---------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """Number of ids in use, **special tokens included** (also ``len(tok)``): a tokenizer
        trained with ``vocab_size=32_000`` has 32,000, whatever its special tokens. (The
        ``transformers`` wrapper, :meth:`to_transformers`, counts as ``transformers`` does: its
        ``vocab_size`` is the regular tokens only, its ``len()`` every id.) :attr:`n_vocab` is
        one past the largest id."""
        return self._core.num_ids

    def __len__(self) -> int:
        return self._core.num_ids

    @property
    def n_vocab(self) -> int:
        """One past the largest id (the embedding size a model needs), as in tiktoken."""
        return self._core.id_bound

    @property
    def special_tokens(self) -> Dict[str, int]:
        """The special tokens, ``str -> id``."""
        return dict(self._specials)

    @property
    def algorithm(self) -> str:
        return self._core.options.algorithm

    @property
    def boundary_penalty(self) -> float:
        return self._core.options.boundary_penalty

    @property
    def token_preference(self) -> bool:
        return self._core.options.token_preference

    @property
    def options(self) -> Dict[str, Any]:
        """The encoding options as a dict."""
        return _options_dict(self._core.options)

    @property
    def max_token_length(self) -> int:
        """Length in bytes of the longest regular token."""
        return self._core.max_token_len

    def token_bytes(self) -> Dict[int, bytes]:
        """All regular tokens, ``id -> bytes``."""
        ids, toks = self._core.tokens()
        return dict(zip(ids, toks))

    def get_vocab(self) -> Dict[bytes, int]:
        """All tokens (special ones as UTF-8 bytes), ``bytes -> id``."""
        ids, toks = self._core.tokens()
        v = dict(zip(toks, ids))
        v.update({s.encode("utf-8"): i for s, i in self._specials.items()})
        return v

    def __repr__(self) -> str:
        return (f"Tokenizer(vocab_size={self.vocab_size}, special_tokens={len(self._specials)}, "
                f"algorithm={self.algorithm!r}, boundary_penalty={self.boundary_penalty}, "
                f"token_preference={self.token_preference})")
