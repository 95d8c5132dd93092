"""A cnfmce tokenizer as a ``transformers`` tokenizer (``pip install "cnfmce[hf]"``, transformers 5.x).

:class:`CnfmceTokenizer` is a :class:`transformers.PreTrainedTokenizer` (the "python backend") whose
encoding runs in the Rust core: one call per batch (:meth:`cnfmce.Tokenizer.encode_batch`, parallel,
GIL released), never a Python loop over tokens. Everything a ``transformers`` pipeline calls works:
``tok(texts, padding=..., truncation=..., max_length=..., return_tensors="np",
return_offsets_mapping=True)``, text pairs, ``decode``/``batch_decode``, ``apply_chat_template``,
``save_pretrained`` and ``AutoTokenizer.from_pretrained``::

    hf_tok = cnfmce.Tokenizer.load("tok.json").to_transformers(eos_token="<|endoftext|>")
    hf_tok.save_pretrained("my_tokenizer")
    tok = transformers.AutoTokenizer.from_pretrained("my_tokenizer", trust_remote_code=True)
    tok = cnfmce.hf.CnfmceTokenizer.from_pretrained("my_tokenizer")   # same, no remote code

``save_pretrained(dir)`` writes three files: ``cnfmce_tokenizer.json`` (the tokenizer, the format of
:meth:`cnfmce.Tokenizer.save`), ``tokenizer_config.json`` (special tokens, ``add_bos_token`` /
``add_eos_token``, chat template, ``tokenizer_class`` and an ``auto_map`` entry) and
``tokenization_cnfmce.py``, a two-line module that imports this class from the installed cnfmce
package. ``trust_remote_code=True`` therefore runs only that import: the directory loads on any
machine with cnfmce installed, and keeps loading after it is copied or moved.

Special tokens. Every special token (``bos_token``, ``eos_token``, ``pad_token``, ``unk_token``,
``extra_special_tokens``, tokens given to ``add_tokens``/``add_special_tokens``) is a special token of
the underlying :class:`cnfmce.Tokenizer`: one that it already has keeps its id, a new one gets the
next free id (``len(tok)``). A special token must not be the text of a regular vocabulary token.
As in every ``transformers`` tokenizer, special-token text in the input is matched as that token
(never split), unless ``split_special_tokens=True``; note that :meth:`cnfmce.Tokenizer.encode`
does the opposite by default (SPEC section 1: special text is ordinary text unless allowed). All
special tokens of the cnfmce tokenizer count as special here (``all_special_ids``,
``skip_special_tokens=True``).

Token strings. ``convert_ids_to_tokens``, ``tokenize`` and ``get_vocab`` show a regular token's
bytes in GPT-2's byte-to-unicode alphabet, as byte-level BPE tokenizers (GPT-2, Llama 3, Qwen) do:
every byte is one printable character (``" "`` is ``"Ġ"``, ``"\\n"`` is ``"Ċ"``, a UTF-8
continuation byte such as ``0xA9`` is ``"©"``), so tokens that are not valid UTF-8 (part of a
character) have a string too and ``convert_tokens_to_ids`` maps it back. For a vocabulary loaded with
:meth:`cnfmce.Tokenizer.from_hf` these are exactly the strings of the ``tokenizer.json``. Special
tokens are shown as their text. :meth:`CnfmceTokenizer.token_bytes` gives the raw bytes.

Sizes. ``vocab_size`` is the number of regular tokens, special tokens *not* included, as in
``transformers``; ``len(tok)`` is one past the largest id, special tokens included
(:attr:`cnfmce.Tokenizer.n_vocab`), so ``model.resize_token_embeddings(len(tok))`` always has a row
for every id. This differs from :attr:`cnfmce.Tokenizer.vocab_size`, which counts special tokens
too: a cnfmce tokenizer trained with ``vocab_size=32_000`` and one special token has
``vocab_size`` 32,000, and its wrapper ``vocab_size`` 31,999 and ``len()`` 32,000.

Sequences. ``add_special_tokens=True`` (the default of ``__call__``) puts ``bos_token`` before and
``eos_token`` after each sequence when ``add_bos_token`` / ``add_eos_token`` are set (both off by
default, as for GPT-2-style models); a pair is ``[bos] a [eos] [bos] b [eos]``. Offsets
(``return_offsets_mapping=True``) are character spans into each input string computed in the
core (:meth:`cnfmce.Tokenizer.encode_with_offsets`); special tokens added by ``add_special_tokens``
and padding get ``(0, 0)``.

The fast-tokenizer surface. ``BatchEncoding.encodings`` holds :class:`Encoding` objects (the
interface of ``tokenizers.Encoding``, made on first use), so ``word_ids()``, ``sequence_ids()``,
``char_to_token()``, ``token_to_chars()``, ``token_to_word()``, ``word_to_tokens()`` work as with
``PreTrainedTokenizerFast``; ``return_overflowing_tokens=True`` gives fast tokenizers' stride windows
(``overflow_to_sample_mapping``). ``is_fast`` stays ``False``: this is not a ``tokenizers`` tokenizer.
Words are defined in :class:`Encoding`.

Unused ids (an id below ``len(tok)`` without a token, e.g. 199998 of o200k_base) convert to ``None``
and are skipped by ``decode``, as in fast tokenizers; unknown keyword arguments are ignored, as
transformers' tokenizers ignore them. :meth:`CnfmceTokenizer.decode_stream` decodes ids arriving one
at a time (:class:`DecodeStream`). docs/transformers.md and docs/serving.md have the details.
"""

from __future__ import annotations

import codecs
import json
import os
from collections.abc import Sequence as _SequenceABC
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

try:
    import transformers
    from transformers import PreTrainedTokenizer
    from transformers.tokenization_utils_base import (AddedToken, BatchEncoding, PaddingStrategy,
                                                      TruncationStrategy)
except ImportError as e:  # pragma: no cover - exercised only without transformers
    raise ImportError('cnfmce.hf needs transformers 5.x: pip install "cnfmce[hf]"') from e

from . import _core, formats
from .errors import UnknownIdError
from .tokenizer import Tokenizer

__all__ = ["CnfmceTokenizer", "DecodeStream", "Encoding", "VOCAB_FILE", "MODULE_FILE", "resize_embeddings"]

if int(transformers.__version__.split(".")[0]) < 5:  # pragma: no cover - needs transformers 4
    raise ImportError(f"cnfmce.hf needs transformers 5.x, found {transformers.__version__}: "
                      'pip install "cnfmce[hf]"')

#: The tokenizer file inside a ``save_pretrained`` directory (the :meth:`cnfmce.Tokenizer.save` format).
VOCAB_FILE = "cnfmce_tokenizer.json"
#: The module ``AutoTokenizer`` imports with ``trust_remote_code=True``.
MODULE_FILE = "tokenization_cnfmce.py"

_MODULE_SOURCE = '''"""transformers entry point of a cnfmce tokenizer (written by cnfmce.hf.CnfmceTokenizer.save_pretrained).

The class lives in the installed cnfmce package: pip install "cnfmce[hf]".
"""
from cnfmce.hf import CnfmceTokenizer

__all__ = ["CnfmceTokenizer"]
'''

_AUTO_MAP = {"AutoTokenizer": [MODULE_FILE[:-3] + ".CnfmceTokenizer", None]}

_BYTE_TO_CHAR = formats.bytes_to_unicode()
# str.translate tables: latin-1 code point of a byte <-> its byte-level character.
_TO_ALPHABET = {b: c for b, c in _BYTE_TO_CHAR.items()}
_FROM_ALPHABET = {ord(c): b for b, c in _BYTE_TO_CHAR.items()}


def _bytes_to_str(token: bytes) -> str:
    return token.decode("latin-1").translate(_TO_ALPHABET)


def _str_to_bytes(token: str) -> Optional[bytes]:
    """The bytes of a byte-level token string, or None when it has a character outside the alphabet."""
    t = token.translate(_FROM_ALPHABET)
    try:
        b = t.encode("latin-1")
    except UnicodeEncodeError:
        return None
    # Every character must have come from the alphabet (latin-1 characters outside it, such as
    # " " or "\xad", are not token characters).
    return b if all(ord(c) in _FROM_ALPHABET for c in token) else None


def _with_specials(tok: Tokenizer, new: Dict[str, Optional[int]]) -> Tokenizer:
    """``tok`` with more special tokens; ``None`` ids get the next free ids (from ``tok.n_vocab``)."""
    specials = dict(tok.special_tokens)
    used = set(specials.values())
    nxt = tok.n_vocab
    for s, i in new.items():
        if i is None:
            while nxt in used:
                nxt += 1
            i = nxt
        specials[s] = i
        used.add(i)
    from .tokenizer import _special_pairs
    ids, toks = tok._core.tokens()
    return Tokenizer._build(toks, ids, _special_pairs(specials, 0), tok._core.options, tok.metadata)


def _content(token: Any) -> str:
    return str(token)


class CnfmceTokenizer(PreTrainedTokenizer):
    """A ``transformers`` tokenizer backed by a :class:`cnfmce.Tokenizer` (see the module docstring).

    Make one with :meth:`cnfmce.Tokenizer.to_transformers`, ``CnfmceTokenizer(tokenizer=tok, ...)``,
    ``CnfmceTokenizer(vocab_file="tok.json", ...)`` or :meth:`from_pretrained`. Keyword arguments
    are those of :class:`transformers.PreTrainedTokenizer` (``bos_token``, ``eos_token``,
    ``pad_token``, ``unk_token``, ``extra_special_tokens``, ``chat_template``, ``model_max_length``,
    ``padding_side``, ...) plus ``add_bos_token`` / ``add_eos_token`` (default False).
    """

    vocab_files_names = {"vocab_file": VOCAB_FILE}
    model_input_names = ["input_ids", "attention_mask"]
    #: No space is ever added before the text, nor before the words of ``is_split_into_words=True``
    #: input (each word is encoded as given).
    add_prefix_space = False

    def __init__(self, vocab_file: Optional[str] = None, *, tokenizer: Optional[Tokenizer] = None,
                 add_bos_token: bool = False, add_eos_token: bool = False, **kwargs: Any) -> None:
        if tokenizer is None:
            if vocab_file is None:
                raise ValueError("CnfmceTokenizer needs a cnfmce.Tokenizer (tokenizer=...) or a "
                                 f"tokenizer file (vocab_file=...; {VOCAB_FILE} in a saved directory)")
            tokenizer = Tokenizer.load(vocab_file)
        elif not isinstance(tokenizer, Tokenizer):
            raise TypeError(f"tokenizer must be a cnfmce.Tokenizer, got {type(tokenizer).__name__}")
        if kwargs.pop("add_prefix_space", False):
            raise ValueError("add_prefix_space=True is not supported: CnfmceTokenizer encodes the text, "
                             "and each word of is_split_into_words=True input, as given (add the "
                             "spaces to the words you pass)")
        for name, flag in (("add_bos_token", add_bos_token), ("add_eos_token", add_eos_token)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be True or False, got {flag!r}")

        # Every special token transformers will know must be a special token of the core, with
        # the same id when the saved config gives one.
        wanted: Dict[str, Optional[int]] = {}
        for key in self.SPECIAL_TOKENS_ATTRIBUTES:
            v = kwargs.get(key)
            if v is not None:
                if not isinstance(v, (str, AddedToken)):
                    raise TypeError(f"{key} must be a str, got {type(v).__name__}")
                wanted.setdefault(_content(v), None)
        extra = kwargs.get("extra_special_tokens") or kwargs.get("additional_special_tokens") or []
        for v in (extra.values() if isinstance(extra, dict) else extra):
            wanted.setdefault(_content(v), None)
        for key, v in (kwargs.get("model_specific_special_tokens") or {}).items():
            wanted.setdefault(_content(v), None)
        for i, v in (kwargs.get("added_tokens_decoder") or {}).items():
            wanted[_content(v)] = int(i)
        tokenizer = self._ensure_specials(tokenizer, wanted)

        self._tok = tokenizer
        self._add_bos = add_bos_token
        self._add_eos = add_eos_token
        self._tables: Optional[Tuple[List[Optional[str]], Dict[str, int]]] = None
        self._all_matcher_cache: Dict[bool, Any] = {}
        # Every core special token is an added token; the saved configuration says which of them
        # are "special" for transformers (tokens from add_tokens(..., special_tokens=False) are not).
        saved = {int(i): v for i, v in (kwargs.pop("added_tokens_decoder", None) or {}).items()
                 if isinstance(v, AddedToken)}
        self._added_tokens_decoder = {
            i: saved.get(i) or AddedToken(s, special=True, normalized=False, lstrip=False, rstrip=False,
                                          single_word=False)
            for s, i in sorted(tokenizer.special_tokens.items(), key=lambda kv: kv[1])}
        super().__init__(add_bos_token=add_bos_token, add_eos_token=add_eos_token, **kwargs)
        # The core's other special tokens are special here too (all_special_ids, skip_special_tokens).
        named = set(self.all_special_tokens)
        for i, t in self._added_tokens_decoder.items():
            if t.special and t.content not in named:
                self._extra_special_tokens.append(t)
        self._auto_map = dict(_AUTO_MAP)
        for flag, key in ((add_bos_token, "bos_token"), (add_eos_token, "eos_token")):
            if flag and getattr(self, key) is None:
                raise ValueError(f"add_{key}=True needs a {key}")

    @staticmethod
    def _ensure_specials(tok: Tokenizer, wanted: Dict[str, Optional[int]]) -> Tokenizer:
        have = tok.special_tokens
        new: Dict[str, Optional[int]] = {}
        for s, i in wanted.items():
            if not s:
                raise ValueError("a special token is empty")
            if s in have:
                if i is not None and have[s] != i:
                    raise ValueError(f"special token {s!r} has id {have[s]} in the cnfmce tokenizer, "
                                     f"not {i} as the configuration says")
                continue
            regular = tok.token_to_id(s)
            if regular is not None:
                raise ValueError(f"{s!r} is a regular token of the vocabulary (id {regular}); a special "
                                 "token must be a string of its own, e.g. '<|endoftext|>'")
            if i is not None and (i in have.values() or i < tok.n_vocab and _is_regular(tok, i)):
                raise ValueError(f"special token {s!r}: id {i} is already used")
            new[s] = i
        return _with_specials(tok, new) if new else tok

    # --- the cnfmce tokenizer -----------------------------------------------------------------

    @property
    def cnfmce_tokenizer(self) -> Tokenizer:
        """The underlying :class:`cnfmce.Tokenizer` (with every special token of this tokenizer)."""
        return self._tok

    @property
    def add_bos_token(self) -> bool:
        """Whether ``add_special_tokens=True`` puts ``bos_token`` before each sequence."""
        return self._add_bos

    @add_bos_token.setter
    def add_bos_token(self, value: bool) -> None:
        if value and self.bos_token is None:
            raise ValueError("add_bos_token=True needs a bos_token")
        self._add_bos = bool(value)

    @property
    def add_eos_token(self) -> bool:
        """Whether ``add_special_tokens=True`` puts ``eos_token`` after each sequence."""
        return self._add_eos

    @add_eos_token.setter
    def add_eos_token(self, value: bool) -> None:
        if value and self.eos_token is None:
            raise ValueError("add_eos_token=True needs an eos_token")
        self._add_eos = bool(value)

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        state["_tables"] = None
        state["_all_matcher_cache"] = {}
        return state

    # --- vocabulary ---------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """Number of regular (non-special) tokens, as in ``transformers`` (``len(tok)`` counts every
        id; :attr:`cnfmce.Tokenizer.vocab_size` counts the special tokens too)."""
        return self._tok._core.num_regular

    def __len__(self) -> int:
        """One past the largest id, special tokens included (the embedding rows a model needs)."""
        return self._tok.n_vocab

    def apply_chat_template(self, *args: Any, **kwargs: Any) -> Any:
        """``transformers``' ``apply_chat_template``; without jinja2 (which renders the templates)
        an ImportError that names the extra to install."""
        from ._extras import require
        require("jinja2", "apply_chat_template (chat templates)")
        return super().apply_chat_template(*args, **kwargs)

    def _update_total_vocab_size(self) -> None:
        self.total_vocab_size = self._tok.n_vocab

    def _vocab_tables(self) -> Tuple[List[Optional[str]], Dict[str, int]]:
        if self._tables is None:
            ids, toks = self._tok._core.tokens()
            by_id: List[Optional[str]] = [None] * self._tok.n_vocab
            strs = [_bytes_to_str(t) for t in toks]
            for i, s in zip(ids, strs):
                by_id[i] = s
            to_id = dict(zip(strs, ids))
            for s, i in self._tok.special_tokens.items():
                by_id[i] = s
                to_id[s] = i
            self._tables = (by_id, to_id)
        return self._tables

    def get_vocab(self) -> Dict[str, int]:
        """Every token as ``str -> id``: regular tokens in the byte-to-unicode alphabet, special
        tokens as their text."""
        return dict(self._vocab_tables()[1])

    def token_bytes(self, ids: Union[int, Iterable[int]]) -> Union[bytes, List[bytes]]:
        """The raw bytes of one token id, or of each id of a list."""
        if isinstance(ids, int):
            return self._tok.id_to_token(ids)
        return [self._tok.id_to_token(int(i)) for i in ids]

    def _convert_token_to_id(self, token: str) -> Optional[int]:
        i = self._vocab_tables()[1].get(token)
        if i is None:
            return self.unk_token_id
        return i

    def _convert_id_to_token(self, index: int) -> Optional[str]:
        """The token string of ``index``; ``None`` for an id without a token (an unused id below
        ``len(tok)``, such as 199998 of o200k_base, or an id past the end), as fast tokenizers
        answer. A negative id raises ``ValueError``."""
        if index < 0:
            raise ValueError(f"token ids are >= 0, got {index}")
        by_id = self._vocab_tables()[0]
        return by_id[index] if index < len(by_id) else None

    def convert_tokens_to_string(self, tokens: List[str]) -> str:
        """The text of token strings (byte-level strings and special-token text)."""
        specials = self._tok.special_tokens
        out = bytearray()
        for t in tokens:
            if t is None:  # the token of an unused id (convert_ids_to_tokens gives None)
                continue
            if t in specials:
                out += t.encode("utf-8")
                continue
            b = _str_to_bytes(t)
            if b is None:
                raise ValueError(f"{t!r} is not a token string of this tokenizer")
            out += b
        return out.decode("utf-8", errors="replace")

    def _add_tokens(self, new_tokens: Any, special_tokens: bool = False) -> int:
        if new_tokens is None:
            return 0
        todo: List[AddedToken] = []
        for t in new_tokens:
            if not isinstance(t, (str, AddedToken)):
                raise TypeError(f"token {t!r} is not a string but a {type(t).__name__}")
            content = _content(t)
            if not content:
                continue
            if isinstance(t, str):
                is_special = special_tokens or content in self.all_special_tokens
                t = AddedToken(content, special=is_special, normalized=False, lstrip=False, rstrip=False,
                               single_word=False)
            elif special_tokens:
                t.__setstate__({"special": True, "normalized": False})
            if content in self._added_tokens_encoder:
                continue
            if self._tok.token_to_id(content) is not None:
                if t.special:
                    raise ValueError(f"{content!r} is a regular token of the vocabulary; a special "
                                     "token must be a string of its own")
                continue  # already a token: nothing to add
            todo.append(t)
        if not todo:
            return 0
        self._tok = _with_specials(self._tok, {_content(t): None for t in todo})
        self._tables = None
        self._all_matcher_cache = {}
        specials = self._tok.special_tokens
        for t in todo:
            i = specials[_content(t)]
            self._added_tokens_decoder[i] = t
            self._added_tokens_encoder[_content(t)] = i
            if t.special and _content(t) not in self.all_special_tokens:
                self._extra_special_tokens.append(t)
        self._update_trie()
        self._update_total_vocab_size()
        return len(todo)

    # --- encoding -----------------------------------------------------------------------------

    def _allowed(self, split_special_tokens: bool) -> Any:
        """allowed_special for the core: every special token unless split_special_tokens."""
        if split_special_tokens or not self._tok.special_tokens:
            return frozenset()
        return "all"

    def _encode_texts(self, texts: List[str], split_special_tokens: bool, offsets: bool
                      ) -> Tuple[List[List[int]], Optional[List[List[Tuple[int, int]]]]]:
        allowed = self._allowed(split_special_tokens)
        if offsets:
            pairs = self._tok.encode_batch_with_offsets(texts, allowed_special=allowed)
            return [p[0] for p in pairs], [p[1] for p in pairs]
        if len(texts) == 1:
            return [self._tok.encode(texts[0], allowed_special=allowed)], None
        return self._tok.encode_batch(texts, allowed_special=allowed), None

    def _tokenize(self, text: str, **kwargs: Any) -> List[str]:
        by_id = self._vocab_tables()[0]
        return [by_id[i] for i in self._tok.encode(text)]  # type: ignore[misc]

    def tokenize(self, text: str, pair: Optional[str] = None, add_special_tokens: bool = False,
                 **kwargs: Any) -> List[str]:
        """The token strings of ``text`` (one call to the core; special-token text is matched)."""
        split = kwargs.pop("split_special_tokens", self.split_special_tokens)
        texts = [text] if pair is None else [text, pair]
        ids, _ = self._encode_texts(texts, split, False)
        seq = (self.build_inputs_with_special_tokens(*ids) if add_special_tokens
               else [i for part in ids for i in part])
        by_id = self._vocab_tables()[0]
        return [by_id[i] for i in seq]  # type: ignore[misc]

    def _special_ids(self) -> Tuple[List[int], List[int]]:
        bos = [self.bos_token_id] if self._add_bos and self.bos_token is not None else []
        eos = [self.eos_token_id] if self._add_eos and self.eos_token is not None else []
        return bos, eos

    def build_inputs_with_special_tokens(self, token_ids_0: List[int],
                                         token_ids_1: Optional[List[int]] = None) -> List[int]:
        """``[bos] a [eos]`` (``[bos] a [eos] [bos] b [eos]`` for a pair), each when enabled."""
        bos, eos = self._special_ids()
        out = bos + list(token_ids_0) + eos
        if token_ids_1 is not None:
            out += bos + list(token_ids_1) + eos
        return out

    def get_special_tokens_mask(self, token_ids_0: List[int], token_ids_1: Optional[List[int]] = None,
                                already_has_special_tokens: bool = False) -> List[int]:
        if already_has_special_tokens:
            return super().get_special_tokens_mask(token_ids_0, token_ids_1, True)
        bos, eos = self._special_ids()
        mask = [1] * len(bos) + [0] * len(token_ids_0) + [1] * len(eos)
        if token_ids_1 is not None:
            mask += [1] * len(bos) + [0] * len(token_ids_1) + [1] * len(eos)
        return mask

    def create_token_type_ids_from_sequences(self, token_ids_0: List[int],
                                             token_ids_1: Optional[List[int]] = None) -> List[int]:
        """0 for the first sequence and its special tokens, 1 for the second."""
        bos, eos = self._special_ids()
        n0 = len(bos) + len(token_ids_0) + len(eos)
        if token_ids_1 is None:
            return [0] * n0
        return [0] * n0 + [1] * (len(bos) + len(token_ids_1) + len(eos))

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        bos, eos = self._special_ids()
        return (len(bos) + len(eos)) * (2 if pair else 1)

    def _truncate(self, n0: int, n1: Optional[int], remove: int, strategy: TruncationStrategy
                  ) -> Tuple[int, int]:
        """How many tokens to drop from the first and the second sequence (the python backend's
        rules, see ``PreTrainedTokenizer.truncate_sequences``)."""
        if remove <= 0:
            return 0, 0
        if strategy == TruncationStrategy.ONLY_FIRST or (
                strategy == TruncationStrategy.LONGEST_FIRST and n1 is None):
            return min(remove, n0), 0
        if strategy == TruncationStrategy.LONGEST_FIRST:
            n1 = n1 or 0
            first = min(abs(n1 - n0), remove)
            second = remove - first
            if n0 > n1:
                r0, r1 = first + second // 2, second - second // 2
            else:
                r0, r1 = second // 2, first + second - second // 2
            return min(r0, n0), min(r1, n1)
        if strategy == TruncationStrategy.ONLY_SECOND and n1:
            return 0, min(remove, n1)
        return 0, 0

    @staticmethod
    def _cut(seq: List[Any], k: int, side: str) -> List[Any]:
        if k <= 0:
            return seq
        return seq[k:] if side == "left" else seq[:len(seq) - k]

    def _split_inputs(self, text: Any, text_pair: Any, is_split_into_words: bool
                      ) -> Tuple[bool, List[Any], List[Any]]:
        """(batched, firsts, pairs); each element is a str, a list of str (words) or a list of ints."""
        def is_ids(x: Any) -> bool:
            return isinstance(x, (list, tuple)) and len(x) > 0 and isinstance(x[0], int)

        if isinstance(text, str) or is_ids(text) or (
                is_split_into_words and isinstance(text, (list, tuple)) and text
                and isinstance(text[0], str)):
            if text_pair is not None and not (isinstance(text_pair, str) or isinstance(text_pair, (list, tuple))):
                raise ValueError(f"text_pair must be a str, got {type(text_pair).__name__}")
            return False, [text], [text_pair]
        if not isinstance(text, (list, tuple)):
            raise ValueError("text input must be a str, a list of str, a list of (str, str) pairs or a "
                             f"list of ids, got {type(text).__name__}")
        firsts = list(text)
        if text_pair is not None:
            if not isinstance(text_pair, (list, tuple)) or len(text_pair) != len(firsts):
                raise ValueError("If `text` is a batch, `text_pair` must also be a batch of the same length.")
            return True, firsts, list(text_pair)
        pairs: List[Any] = [None] * len(firsts)
        for k, t in enumerate(firsts):
            if isinstance(t, (list, tuple)) and t and not isinstance(t[0], int):
                as_pair = (len(t) == 2 and (not is_split_into_words or isinstance(t, tuple))
                           and all(isinstance(x, (str, list, tuple)) for x in t))
                if as_pair:
                    firsts[k], pairs[k] = t
                elif len(t) == 1 and not is_split_into_words:
                    firsts[k] = t[0]
                elif not is_split_into_words:
                    raise ValueError(f"Expected a pair of sequences, got {len(t)} sequences.")
        return True, firsts, pairs

    def _encode_plus(self, text: Any, text_pair: Any = None, add_special_tokens: bool = True,
                     padding_strategy: PaddingStrategy = PaddingStrategy.DO_NOT_PAD,
                     truncation_strategy: TruncationStrategy = TruncationStrategy.DO_NOT_TRUNCATE,
                     max_length: Optional[int] = None, stride: int = 0, is_split_into_words: bool = False,
                     pad_to_multiple_of: Optional[int] = None, padding_side: Optional[str] = None,
                     return_tensors: Any = None, return_token_type_ids: Optional[bool] = None,
                     return_attention_mask: Optional[bool] = None, return_overflowing_tokens: bool = False,
                     return_special_tokens_mask: bool = False, return_offsets_mapping: bool = False,
                     return_length: bool = False, verbose: bool = True,
                     split_special_tokens: Optional[bool] = None, **kwargs: Any) -> BatchEncoding:
        # Keyword arguments meant for other tokenizers (``src_lang=...``, ``foo=1``) are ignored, as
        # transformers' own tokenizers (both backends) ignore them.
        if split_special_tokens is None:
            split_special_tokens = self.split_special_tokens
        sanitize = kwargs.pop("sanitize_control_tokens", False)
        batched, firsts, pairs = self._split_inputs(text, text_pair, is_split_into_words)

        # Every string to encode, once, in one call to the core.
        pieces: List[str] = []
        plan: List[Tuple[Any, Any]] = []
        has_ids = False

        def add(x: Any) -> Any:
            nonlocal has_ids
            if x is None:
                return None
            if isinstance(x, str):
                pieces.append(x)
                return [len(pieces) - 1]
            if isinstance(x, (list, tuple)):
                if not x:
                    return []
                if isinstance(x[0], int):
                    if return_offsets_mapping:
                        raise ValueError("return_offsets_mapping needs text input, not token ids")
                    has_ids = True
                    return ("ids", list(x))
                if is_split_into_words and all(isinstance(w, str) for w in x):
                    start = len(pieces)
                    pieces.extend(x)
                    return _Words(range(start, len(pieces)))
            raise ValueError("Input must be a string, a list of strings (with is_split_into_words=True) "
                             f"or a list of ints, got {type(x).__name__}")

        for a, b in zip(firsts, pairs):
            plan.append((add(a), add(b)))
        if sanitize:
            from transformers.utils.chat_template_utils import encode_marked_chat
            if return_offsets_mapping:
                raise ValueError("sanitize_control_tokens does not give offsets")
            enc_ids = [encode_marked_chat(self, p) for p in pieces]
            enc_off = None
        else:
            enc_ids, enc_off = self._encode_texts(pieces, split_special_tokens, return_offsets_mapping)

        def gather(ref: Any) -> Tuple[Optional[List[int]], Optional[List[Tuple[int, int]]]]:
            if ref is None:
                return None, None
            if isinstance(ref, tuple):
                return ref[1], None
            if len(ref) == 1:
                return enc_ids[ref[0]], (enc_off[ref[0]] if enc_off is not None else None)
            ids: List[int] = []
            offs: List[Tuple[int, int]] = []
            for k in ref:
                ids += enc_ids[k]
                if enc_off is not None:
                    offs += enc_off[k]
            return ids, (offs if enc_off is not None else None)

        if return_token_type_ids is None:
            return_token_type_ids = "token_type_ids" in self.model_input_names
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        truncate = truncation_strategy != TruncationStrategy.DO_NOT_TRUNCATE and bool(max_length)
        bos, eos = self._special_ids() if add_special_tokens else ([], [])
        side = self.truncation_side
        n_bos, n_eos = len(bos), len(eos)
        zero: Tuple[int, int] = (0, 0)
        if return_overflowing_tokens and truncate:
            if stride < 0:
                raise ValueError(f"stride must be >= 0, got {stride}")
            if any(b is not None for _, b in plan) and \
                    truncation_strategy == TruncationStrategy.LONGEST_FIRST:
                raise ValueError(
                    "Not possible to return overflowing tokens for pair of sequences with the "
                    "`longest_first`. Please select another truncation strategy than `longest_first`, "
                    "for instance `only_second` or `only_first`.")

        out: Dict[str, List[Any]] = {"input_ids": []}
        if return_token_type_ids:
            out["token_type_ids"] = []
        if return_special_tokens_mask:
            out["special_tokens_mask"] = []
        if return_offsets_mapping:
            out["offset_mapping"] = []
        lengths: List[int] = []
        # For the encodings: per row, the segments (None for an added special token, else
        # (sequence index, plan index, first token, end token)).
        layouts: List[List[Any]] = []
        sample_of_row: List[int] = []
        for k, (a, b) in enumerate(plan):
            ids0, off0 = gather(a)
            ids1, off1 = gather(b)
            assert ids0 is not None
            n0, n1 = len(ids0), (len(ids1) if ids1 is not None else None)
            # Token ranges [lo, hi) of each sequence, one pair per row (several with overflow).
            windows: List[Tuple[Tuple[int, int], Optional[Tuple[int, int]]]]
            n_special = (n_bos + n_eos) * (1 if ids1 is None else 2)
            if truncate:
                total = n0 + (n1 or 0) + n_special
                r0, r1 = self._truncate(n0, n1, total - max_length, truncation_strategy)  # type: ignore[operator]
                if return_overflowing_tokens and (r0 or r1):
                    if r0:
                        ranges0 = _windows(n0, n0 - r0, stride, side)
                        windows = [(w, None if n1 is None else (0, n1)) for w in ranges0]
                    else:
                        ranges1 = _windows(n1, n1 - r1, stride, side)  # type: ignore[arg-type]
                        windows = [((0, n0), w) for w in ranges1]
                else:
                    lo0, hi0 = (r0, n0) if side == "left" else (0, n0 - r0)
                    w1 = None if n1 is None else ((r1, n1) if side == "left" else (0, n1 - r1))
                    windows = [((lo0, hi0), w1)]
            else:
                windows = [((0, n0), None if n1 is None else (0, n1))]
            for w0, w1 in windows:
                # The core's list itself when nothing is added or cut (no copy on the common path).
                seq = ids0 if w0 == (0, n0) else ids0[w0[0]:w0[1]]
                if n_bos or n_eos:
                    seq = bos + seq + eos
                layout: List[Any] = [None] * n_bos + [(0, k, w0[0], w0[1])] + [None] * n_eos
                if ids1 is not None:
                    assert w1 is not None
                    seq = seq + bos + ids1[w1[0]:w1[1]] + eos
                    layout += [None] * n_bos + [(1, k, w1[0], w1[1])] + [None] * n_eos
                if not truncate:
                    self._eventual_warn_about_too_long_sequence(seq, max_length, verbose)
                out["input_ids"].append(seq)
                lengths.append(len(seq))
                layouts.append(layout)
                sample_of_row.append(k)
                m0 = n_bos + (w0[1] - w0[0]) + n_eos
                if return_token_type_ids:
                    out["token_type_ids"].append([0] * m0 + [1] * (len(seq) - m0))
                if return_special_tokens_mask:
                    mask = [1] * n_bos + [0] * (w0[1] - w0[0]) + [1] * n_eos
                    if w1 is not None:
                        mask += [1] * n_bos + [0] * (w1[1] - w1[0]) + [1] * n_eos
                    out["special_tokens_mask"].append(mask)
                if return_offsets_mapping:
                    offs = [zero] * n_bos + off0[w0[0]:w0[1]] + [zero] * n_eos  # type: ignore[index]
                    if w1 is not None:
                        offs += [zero] * n_bos + off1[w1[0]:w1[1]] + [zero] * n_eos  # type: ignore[index]
                    out["offset_mapping"].append(offs)

        pads: List[Tuple[str, int]] = []
        side_pad = padding_side if padding_side is not None else self.padding_side
        if padding_strategy != PaddingStrategy.DO_NOT_PAD:
            target = max(lengths, default=0) if padding_strategy == PaddingStrategy.LONGEST else max_length
            if target is not None and pad_to_multiple_of and target % pad_to_multiple_of:
                target = (target // pad_to_multiple_of + 1) * pad_to_multiple_of
            if side_pad not in ("left", "right"):
                raise ValueError(f"padding_side must be 'left' or 'right', got {side_pad!r}")
            pad_id = self.pad_token_id
            masks = []
            for k, n in enumerate(lengths):
                d = (target - n) if target is not None and n < target else 0
                pads.append((side_pad, d))
                masks.append(([1] * n + [0] * d) if side_pad == "right" else ([0] * d + [1] * n))
                if not d:
                    continue
                for key, fill in (("input_ids", pad_id), ("token_type_ids", self.pad_token_type_id),
                                  ("special_tokens_mask", 1), ("offset_mapping", zero)):
                    if key in out:
                        v = out[key][k]
                        out[key][k] = v + [fill] * d if side_pad == "right" else [fill] * d + v
            if return_attention_mask:
                out["attention_mask"] = masks
        elif return_attention_mask:
            out["attention_mask"] = [[1] * n for n in lengths]
        if not pads:
            pads = [("right", 0)] * len(lengths)
        if return_length:
            out["length"] = lengths if batched or return_overflowing_tokens else [len(out["input_ids"][0])]
        if return_overflowing_tokens:
            out["overflow_to_sample_mapping"] = sample_of_row

        n_sequences = 2 if any(b is not None for _, b in plan) else 1
        encodings = None if has_ids or sanitize else _Encodings(
            self, pieces, plan, enc_ids, enc_off, layouts, pads, out["input_ids"], n_sequences,
            split_special_tokens)
        if not batched and not return_overflowing_tokens:
            single = {k: v[0] for k, v in out.items()}
            return BatchEncoding(single, encoding=encodings, tensor_type=return_tensors,
                                 prepend_batch_axis=True, n_sequences=n_sequences)
        return BatchEncoding(out, encoding=encodings, tensor_type=return_tensors, n_sequences=n_sequences)

    def _pad(self, encoded_inputs: Any, max_length: Optional[int] = None,
             padding_strategy: PaddingStrategy = PaddingStrategy.DO_NOT_PAD,
             pad_to_multiple_of: Optional[int] = None, padding_side: Optional[str] = None,
             return_attention_mask: Optional[bool] = None) -> dict:
        # transformers' padding, plus offset_mapping padded with (0, 0).
        offsets = encoded_inputs.get("offset_mapping") if hasattr(encoded_inputs, "get") else None
        n = len(encoded_inputs[self.model_input_names[0]])
        result = super()._pad(encoded_inputs, max_length, padding_strategy, pad_to_multiple_of,
                              padding_side, return_attention_mask)
        if offsets is not None:
            d = len(result[self.model_input_names[0]]) - n
            if d > 0:
                side = padding_side if padding_side is not None else self.padding_side
                offsets = list(offsets)
                result["offset_mapping"] = (offsets + [(0, 0)] * d if side == "right"
                                            else [(0, 0)] * d + offsets)
        return result

    # --- decoding -----------------------------------------------------------------------------

    def _decode(self, token_ids: Union[int, List[int]], skip_special_tokens: bool = False,
                clean_up_tokenization_spaces: Optional[bool] = None, **kwargs: Any) -> str:
        if isinstance(token_ids, int):
            token_ids = [token_ids]
        if skip_special_tokens:
            skip = set(self.all_special_ids)
            token_ids = [i for i in token_ids if i not in skip]
        try:
            text = self._tok.decode(token_ids)
        except UnknownIdError:
            # Ids without a token (unused ids below len(tok), ids past the end) are skipped, as
            # fast tokenizers skip them: a model whose embedding has a row for them can emit them.
            token_ids = [int(i) for i in token_ids]
            if any(i < 0 for i in token_ids):
                raise ValueError(f"token ids are >= 0, got {min(token_ids)}") from None
            by_id = self._vocab_tables()[0]
            text = self._tok.decode([i for i in token_ids if i < len(by_id) and by_id[i] is not None])
        if clean_up_tokenization_spaces is None:
            clean_up_tokenization_spaces = self.clean_up_tokenization_spaces
        if clean_up_tokenization_spaces:
            text = self.clean_up_tokenization(text)
        return text

    def decode_stream(self, skip_special_tokens: bool = False) -> "DecodeStream":
        """An incremental decoder for ids that arrive one at a time (text generation): see
        :class:`DecodeStream`."""
        return DecodeStream(self, skip_special_tokens=skip_special_tokens)

    # --- saving -------------------------------------------------------------------------------

    @classmethod
    def register_for_auto_class(cls, auto_class: Any = "AutoTokenizer") -> None:
        """Nothing to do: :meth:`save_pretrained` always writes the ``auto_map`` entry for
        ``AutoTokenizer`` and the module it names."""
        name = auto_class if isinstance(auto_class, str) else getattr(auto_class, "__name__", "")
        if name != "AutoTokenizer":
            raise ValueError(f"CnfmceTokenizer registers only with AutoTokenizer, not {name!r}")

    def save_vocabulary(self, save_directory: str, filename_prefix: Optional[str] = None
                        ) -> Tuple[str, ...]:
        if not os.path.isdir(save_directory):
            raise NotADirectoryError(f"{save_directory} is not a directory")
        path = os.path.join(save_directory, (filename_prefix + "-" if filename_prefix else "") + VOCAB_FILE)
        self._tok.save(path)
        return (path,)

    def _save_pretrained(self, save_directory: Any, file_names: Tuple[str, ...],
                         legacy_format: Optional[bool] = None, filename_prefix: Optional[str] = None
                         ) -> Tuple[str, ...]:
        # The tokenizer file holds every token, special ones included: no added_tokens.json.
        return tuple(file_names) + self.save_vocabulary(str(save_directory), filename_prefix)

    def save_pretrained(self, save_directory: Union[str, "os.PathLike[str]"], legacy_format: Optional[bool] = None,
                        filename_prefix: Optional[str] = None, push_to_hub: bool = False,
                        **kwargs: Any) -> Tuple[str, ...]:
        """Writes the tokenizer file, ``tokenizer_config.json`` and ``tokenization_cnfmce.py`` (see
        the module docstring); ``AutoTokenizer.from_pretrained(dir, trust_remote_code=True)`` and
        :meth:`from_pretrained` load the directory."""
        save_directory = os.fspath(save_directory)
        if os.path.isfile(save_directory):
            raise NotADirectoryError(f"{save_directory} is a file, not a directory")
        os.makedirs(save_directory, exist_ok=True)
        module = os.path.join(save_directory, MODULE_FILE)
        formats.write_bytes_atomic(module, _MODULE_SOURCE.encode("utf-8"))
        files = super().save_pretrained(save_directory, legacy_format=legacy_format,
                                        filename_prefix=filename_prefix, push_to_hub=push_to_hub, **kwargs)
        # transformers drops add_bos_token / add_eos_token from the config (its fast tokenizers keep
        # them in tokenizer.json); ours live in the config.
        config_path = os.path.join(save_directory, (filename_prefix + "-" if filename_prefix else "")
                                   + "tokenizer_config.json")
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
        config["add_bos_token"] = self._add_bos
        config["add_eos_token"] = self._add_eos
        config["auto_map"] = dict(_AUTO_MAP)
        config["tokenizer_class"] = type(self).__name__
        formats.write_bytes_atomic(config_path, (json.dumps(config, indent=2, sort_keys=True,
                                                            ensure_ascii=False) + "\n").encode("utf-8"))
        return tuple(files) + (module,)


class DecodeStream:
    """Incremental detokenization, as a serving engine streams generated text: feed ids one at a
    time with :meth:`step`; each call returns the new text (``None`` when there is none yet).

    The text returned so far never changes and never holds a broken character: the bytes of a token
    that ends inside a UTF-8 character are held back until the character is complete. Bytes that
    can never complete a character (an invalid sequence) become U+FFFD as soon as that is certain.
    Ids without a token are skipped, special tokens give their text (nothing with
    ``skip_special_tokens=True``). After the last id, :meth:`flush` returns what is still held back
    (U+FFFD for an unfinished character); the pieces joined are exactly
    ``tok.decode(ids, skip_special_tokens=..., clean_up_tokenization_spaces=False)``.

    The same interface as ``tokenizers.decoders.DecodeStream`` except that the tokenizer is given
    once, here, instead of to every :meth:`step`::

        stream = tok.decode_stream(skip_special_tokens=True)
        for i in generated_ids:
            piece = stream.step(i)
            if piece is not None:
                print(piece, end="", flush=True)
        print(stream.flush())
    """

    def __init__(self, tokenizer: "CnfmceTokenizer", skip_special_tokens: bool = False) -> None:
        self._core = tokenizer.cnfmce_tokenizer
        self._skip = set(tokenizer.all_special_ids) if skip_special_tokens else set()
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def step(self, token_id: int) -> Optional[str]:
        """The text that ``token_id`` completes (``None`` when nothing new is complete)."""
        token_id = int(token_id)
        if token_id < 0:
            raise ValueError(f"token ids are >= 0, got {token_id}")
        if token_id in self._skip:
            return None
        try:
            data = self._core.decode_bytes([token_id])
        except UnknownIdError:
            return None
        text = self._decoder.decode(data)
        return text or None

    def flush(self) -> str:
        """What is held back after the last id: U+FFFD for an unfinished character, else ``""``."""
        return self._decoder.decode(b"", final=True)


def _windows(n: int, keep: int, stride: int, side: str) -> List[Tuple[int, int]]:
    """Token ranges of the overflowing windows of a sequence of ``n`` tokens cut to ``keep`` tokens,
    each overlapping the one before by ``stride`` tokens (as Hugging Face tokenizers cut them): the
    first window is the truncated sequence, the last reaches the end (the start with
    ``truncation_side="left"``)."""
    if keep <= 0:
        raise ValueError("max_length leaves no room for this sequence once the other sequence and the "
                         "special tokens are counted")
    if stride >= keep:
        raise ValueError(f"stride ({stride}) must be smaller than the number of tokens kept of the "
                         f"truncated sequence ({keep})")
    step = keep - stride
    out: List[Tuple[int, int]] = []
    if side == "left":
        stop = n
        while True:
            start = max(stop - keep, 0)
            out.append((start, stop))
            if start == 0:
                return out
            stop -= step
    start = 0
    while True:
        stop = min(start + keep, n)
        out.append((start, stop))
        if stop == n:
            return out
        start += step


class _Words(list):
    """The piece indices of one pre-split input (``is_split_into_words=True``): one word each."""


class Encoding:
    """One row of a :class:`transformers.BatchEncoding` made by :class:`CnfmceTokenizer`: the object
    fast tokenizers put in ``BatchEncoding.encodings`` (``tokenizers.Encoding``), with the same
    attributes and methods, so that ``BatchEncoding.word_ids()``, ``sequence_ids()``,
    ``char_to_token()``, ``token_to_chars()``, ``token_to_word()``, ``word_to_tokens()``,
    ``word_to_chars()`` and ``char_to_word()`` work.

    Offsets are character spans into the input string (into the word for ``is_split_into_words``
    input, as for fast tokenizers). *Words*: for pre-split input the words are the given words. For
    a string, a token starts a new word exactly when it starts at a unit boundary of the core (SPEC
    section 2: a unit is a run of letters and marks outside Han and kana, every other character is a
    unit by itself); a token that starts inside a unit continues the word of the token before it.
    So a word is the shortest run of whole tokens that covers whole units: ``" cat"`` is one word,
    ``"hel"`` + ``"lo"`` is one word, a multi-word token such as ``" of the"`` is one word, ``"."``
    is a word of its own, and so is each Han character. Added special tokens and padding have no
    word and no sequence (``None``).
    """

    __slots__ = ("ids", "type_ids", "_tokens", "offsets", "attention_mask", "special_tokens_mask",
                 "word_ids", "sequence_ids", "overflowing", "n_sequences")

    def __init__(self, ids: List[int], type_ids: List[int], tokens: Any,
                 offsets: List[Tuple[int, int]], attention_mask: List[int], special_tokens_mask: List[int],
                 word_ids: List[Optional[int]], sequence_ids: List[Optional[int]], n_sequences: int) -> None:
        self.ids = ids
        self.type_ids = type_ids
        self._tokens = tokens  # the list, or the id -> string table to make it from
        self.offsets = offsets
        self.attention_mask = attention_mask
        self.special_tokens_mask = special_tokens_mask
        self.word_ids = word_ids
        self.sequence_ids = sequence_ids
        self.overflowing: List["Encoding"] = []
        self.n_sequences = n_sequences

    @property
    def tokens(self) -> List[str]:
        """The token strings (``convert_ids_to_tokens``; ``""`` for an id without a token)."""
        if isinstance(self._tokens, tuple):
            (by_id,) = self._tokens
            n = len(by_id)
            self._tokens = [(by_id[t] if t < n else None) or "" for t in self.ids]
        return self._tokens

    @property
    def words(self) -> List[Optional[int]]:
        """Same as :attr:`word_ids` (the older name in ``tokenizers``)."""
        return self.word_ids

    def __len__(self) -> int:
        return len(self.ids)

    def __reduce__(self) -> Any:
        return (Encoding, (self.ids, self.type_ids, self.tokens, self.offsets, self.attention_mask,
                           self.special_tokens_mask, self.word_ids, self.sequence_ids, self.n_sequences))

    def __repr__(self) -> str:
        return f"Encoding(num_tokens={len(self.ids)}, n_sequences={self.n_sequences})"

    def token_to_sequence(self, token_index: int) -> Optional[int]:
        return self.sequence_ids[token_index]

    def token_to_word(self, token_index: int) -> Optional[int]:
        return self.word_ids[token_index]

    def token_to_chars(self, token_index: int) -> Optional[Tuple[int, int]]:
        if self.sequence_ids[token_index] is None:
            return None
        return self.offsets[token_index]

    def word_to_tokens(self, word_index: int, sequence_index: int = 0) -> Optional[Tuple[int, int]]:
        first = last = None
        for t, (s, w) in enumerate(zip(self.sequence_ids, self.word_ids)):
            if s == sequence_index and w == word_index:
                if first is None:
                    first = t
                last = t
        return None if first is None else (first, last + 1)  # type: ignore[operator]

    def word_to_chars(self, word_index: int, sequence_index: int = 0) -> Optional[Tuple[int, int]]:
        span = self.word_to_tokens(word_index, sequence_index)
        if span is None:
            return None
        offs = self.offsets[span[0]:span[1]]
        return min(a for a, _ in offs), max(b for _, b in offs)

    def char_to_token(self, char_pos: int, sequence_index: int = 0) -> Optional[int]:
        for t, (s, (a, b)) in enumerate(zip(self.sequence_ids, self.offsets)):
            if s == sequence_index and a <= char_pos < b:
                return t
        return None

    def char_to_word(self, char_pos: int, sequence_index: int = 0) -> Optional[int]:
        t = self.char_to_token(char_pos, sequence_index)
        return None if t is None else self.word_ids[t]


class _Encodings(_SequenceABC):
    """``BatchEncoding.encodings`` of a :class:`CnfmceTokenizer` call: the rows' :class:`Encoding`
    objects, each made when it is first asked for (a call that never asks pays nothing for them)."""

    def __init__(self, hf: "CnfmceTokenizer", pieces: List[str], plan: List[Tuple[Any, Any]],
                 enc_ids: List[List[int]], enc_off: Optional[List[List[Tuple[int, int]]]],
                 layouts: List[List[Any]], pads: List[Tuple[str, int]], rows: List[List[int]],
                 n_sequences: int, split_special_tokens: bool) -> None:
        self._hf = hf
        self._pieces = pieces
        self._plan = plan
        self._enc_ids = enc_ids
        self._enc_off = enc_off
        self._layouts = layouts
        self._pads = pads
        self._rows = rows
        self._n_sequences = n_sequences
        self._allowed = hf._allowed(split_special_tokens)
        self._piece_cache: Dict[int, Tuple[List[Tuple[int, int]], List[int]]] = {}
        self._seq_cache: Dict[Tuple[int, int], Tuple[List[Tuple[int, int]], List[int]]] = {}
        self._made: Dict[int, Encoding] = {}

    def __len__(self) -> int:
        return len(self._layouts)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("encoding index out of range")
        enc = self._made.get(i)
        if enc is None:
            enc = self._made[i] = self._make(i)
        return enc

    def __reduce__(self) -> Any:
        return (list, ([self[i] for i in range(len(self))],))

    def _piece(self, k: int) -> Tuple[List[Tuple[int, int]], List[int]]:
        """Character offsets and word ids of the tokens of piece ``k`` (a text on its own)."""
        got = self._piece_cache.get(k)
        if got is not None:
            return got
        import numpy as np
        text = self._pieces[k]
        data = text.encode("utf-8", "surrogatepass")
        units = np.frombuffer(_core.unit_starts(data), dtype=np.uint8)
        lead = (np.frombuffer(data, dtype=np.uint8) & 0xC0) != 0x80
        if self._enc_off is not None:
            # The call's offsets: a token starts inside a character exactly when its span begins
            # before the end of the previous token's (two tokens splitting a character share it).
            offs = self._enc_off[k]
            if offs:
                a = np.fromiter((o[0] for o in offs), dtype=np.int64, count=len(offs))
                e = np.fromiter((o[1] for o in offs), dtype=np.int64, count=len(offs))
                byte_of_char = np.flatnonzero(lead)
                at_char = np.ones(len(offs), dtype=bool)
                at_char[1:] = a[1:] >= e[:-1]
                starts_arr = at_char & (units[byte_of_char[np.minimum(a, len(byte_of_char) - 1)]] == 1)
            else:
                starts_arr = np.zeros(0, dtype=bool)
        else:
            ids, spans = self._hf._tok.encode_bytes_with_offsets(data, allowed_special=self._allowed)
            if ids != self._enc_ids[k]:
                raise RuntimeError("cnfmce: the byte encoding of a text differs from its text encoding")
            if spans:
                a = np.fromiter((x[0] for x in spans), dtype=np.int64, count=len(spans))
                b = np.fromiter((x[1] for x in spans), dtype=np.int64, count=len(spans))
                char_of = np.cumsum(lead) - 1
                offs = list(zip(char_of[a].tolist(), (char_of[b - 1] + 1).tolist()))
                starts_arr = units[a] == 1
            else:
                offs, starts_arr = [], np.zeros(0, dtype=bool)
        if len(starts_arr):
            starts_arr[0] = True
        got = self._piece_cache[k] = (offs, (np.cumsum(starts_arr, dtype=np.int64) - 1).tolist())
        return got

    def _sequence(self, k: int, s: int) -> Tuple[List[Tuple[int, int]], List[int]]:
        """Offsets and word ids of the whole sequence ``s`` of input ``k``."""
        got = self._seq_cache.get((k, s))
        if got is not None:
            return got
        ref = self._plan[k][s]
        offs: List[Tuple[int, int]] = []
        words: List[int] = []
        if isinstance(ref, _Words):
            for w, piece in enumerate(ref):
                o, _ = self._piece(piece)
                offs += o
                words += [w] * len(o)
        else:
            (piece,) = ref  # a text is one piece
            offs, words = self._piece(piece)
        got = self._seq_cache[(k, s)] = (offs, words)
        return got

    def _make(self, i: int) -> Encoding:
        by_id = self._hf._vocab_tables()[0]
        ids = self._rows[i]
        offsets: List[Tuple[int, int]] = []
        word_ids: List[Optional[int]] = []
        seq_ids: List[Optional[int]] = []
        type_ids: List[int] = []
        special: List[int] = []
        seq = 0
        for part in self._layouts[i]:
            if part is None:
                offsets.append((0, 0))
                word_ids.append(None)
                seq_ids.append(None)
                type_ids.append(seq)
                special.append(1)
                continue
            s, k, lo, hi = part
            seq = s
            offs, words = self._sequence(k, s)
            offsets += offs[lo:hi]
            word_ids += words[lo:hi]
            seq_ids += [s] * (hi - lo)
            type_ids += [s] * (hi - lo)
            special += [0] * (hi - lo)
        n = len(offsets)
        attention = [1] * n
        side, d = self._pads[i]
        if d:
            pad_type = self._hf.pad_token_type_id
            fills = ((offsets, (0, 0)), (word_ids, None), (seq_ids, None), (type_ids, pad_type),
                     (special, 1), (attention, 0))
            for lst, fill in fills:
                if side == "right":
                    lst.extend([fill] * d)
                else:
                    lst[:0] = [fill] * d
        return Encoding(list(ids), type_ids, (by_id,), offsets, attention, special, word_ids, seq_ids,
                        self._n_sequences)


def _is_regular(tok: Tokenizer, i: int) -> bool:
    try:
        tok.id_to_token(i)
    except (KeyError, ValueError):
        return False
    return i not in tok.special_tokens.values()


# Vocabulary extension: resize a model's embeddings for an extended tokenizer and fill the new rows.
from .extend import resize_model_embeddings as resize_embeddings  # noqa: E402
