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

Sizes. ``vocab_size`` is the number of regular tokens; ``len(tok)`` is one past the largest id,
special tokens included (:attr:`cnfmce.Tokenizer.n_vocab`), so ``model.resize_token_embeddings(
len(tok))`` always has a row for every id.

Sequences. ``add_special_tokens=True`` (the default of ``__call__``) puts ``bos_token`` before and
``eos_token`` after each sequence when ``add_bos_token`` / ``add_eos_token`` are set (both off by
default, as for GPT-2-style models); a pair is ``[bos] a [eos] [bos] b [eos]``. Offsets
(``return_offsets_mapping=True``) are character spans into each input string computed in the
core (:meth:`cnfmce.Tokenizer.encode_with_offsets`); special tokens added by ``add_special_tokens``
and padding get ``(0, 0)``.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

try:
    import transformers
    from transformers import PreTrainedTokenizer
    from transformers.tokenization_utils_base import (AddedToken, BatchEncoding, PaddingStrategy,
                                                      TruncationStrategy)
except ImportError as e:  # pragma: no cover - exercised only without transformers
    raise ImportError('cnfmce.hf needs transformers 5.x: pip install "cnfmce[hf]"') from e

from . import formats
from .errors import UnknownIdError
from .tokenizer import Tokenizer

__all__ = ["CnfmceTokenizer", "VOCAB_FILE", "MODULE_FILE", "resize_embeddings"]

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

    def __init__(self, vocab_file: Optional[str] = None, *, tokenizer: Optional[Tokenizer] = None,
                 add_bos_token: bool = False, add_eos_token: bool = False, **kwargs: Any) -> None:
        if tokenizer is None:
            if vocab_file is None:
                raise ValueError("CnfmceTokenizer needs a cnfmce.Tokenizer (tokenizer=...) or a "
                                 f"tokenizer file (vocab_file=...; {VOCAB_FILE} in a saved directory)")
            tokenizer = Tokenizer.load(vocab_file)
        elif not isinstance(tokenizer, Tokenizer):
            raise TypeError(f"tokenizer must be a cnfmce.Tokenizer, got {type(tokenizer).__name__}")
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
        """Number of regular (non-special) tokens."""
        return self._tok._core.num_regular

    def __len__(self) -> int:
        """One past the largest id, special tokens included (the embedding rows a model needs)."""
        return self._tok.n_vocab

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

    def _convert_id_to_token(self, index: int) -> str:
        by_id = self._vocab_tables()[0]
        s = by_id[index] if 0 <= index < len(by_id) else None
        if s is None:
            raise UnknownIdError(f"unknown token id {index}")
        return s

    def convert_tokens_to_string(self, tokens: List[str]) -> str:
        """The text of token strings (byte-level strings and special-token text)."""
        specials = self._tok.special_tokens
        out = bytearray()
        for t in tokens:
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
        if split_special_tokens is None:
            split_special_tokens = self.split_special_tokens
        sanitize = kwargs.pop("sanitize_control_tokens", False)
        if kwargs:
            raise TypeError(f"unexpected keyword arguments: {sorted(kwargs)}")
        batched, firsts, pairs = self._split_inputs(text, text_pair, is_split_into_words)

        # Every string to encode, once, in one call to the core.
        pieces: List[str] = []
        plan: List[Tuple[Any, Any]] = []

        def add(x: Any) -> Any:
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
                    return ("ids", list(x))
                if is_split_into_words and all(isinstance(w, str) for w in x):
                    start = len(pieces)
                    pieces.extend(x)
                    return list(range(start, len(pieces)))
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

        if return_overflowing_tokens:
            if return_offsets_mapping:
                raise ValueError("return_overflowing_tokens and return_offsets_mapping cannot be combined "
                                 "with this tokenizer")
            items = [gather(a)[0] for a, _ in plan], [gather(b)[0] for _, b in plan]
            return super()._encode_plus(
                items[0] if batched else items[0][0],
                text_pair=(items[1] if any(x is not None for x in items[1]) else None) if batched
                else items[1][0],
                add_special_tokens=add_special_tokens, padding_strategy=padding_strategy,
                truncation_strategy=truncation_strategy, max_length=max_length, stride=stride,
                pad_to_multiple_of=pad_to_multiple_of, padding_side=padding_side,
                return_tensors=return_tensors, return_token_type_ids=return_token_type_ids,
                return_attention_mask=return_attention_mask, return_overflowing_tokens=True,
                return_special_tokens_mask=return_special_tokens_mask, return_length=return_length,
                verbose=verbose)

        if return_token_type_ids is None:
            return_token_type_ids = "token_type_ids" in self.model_input_names
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        truncate = truncation_strategy != TruncationStrategy.DO_NOT_TRUNCATE and bool(max_length)
        bos, eos = self._special_ids() if add_special_tokens else ([], [])
        side = self.truncation_side
        n_bos, n_eos = len(bos), len(eos)
        zero: Tuple[int, int] = (0, 0)

        out: Dict[str, List[Any]] = {"input_ids": []}
        if return_token_type_ids:
            out["token_type_ids"] = []
        if return_special_tokens_mask:
            out["special_tokens_mask"] = []
        if return_offsets_mapping:
            out["offset_mapping"] = []
        lengths: List[int] = []
        for a, b in plan:
            ids0, off0 = gather(a)
            ids1, off1 = gather(b)
            assert ids0 is not None
            if truncate:
                total = len(ids0) + (len(ids1) if ids1 is not None else 0) + \
                    (n_bos + n_eos) * (1 if ids1 is None else 2)
                r0, r1 = self._truncate(len(ids0), None if ids1 is None else len(ids1),
                                        total - max_length, truncation_strategy)  # type: ignore[operator]
                if r0:
                    ids0 = self._cut(ids0, r0, side)
                    if off0 is not None:
                        off0 = self._cut(off0, r0, side)
                if r1 and ids1 is not None:
                    ids1 = self._cut(ids1, r1, side)
                    if off1 is not None:
                        off1 = self._cut(off1, r1, side)
            if n_bos or n_eos:
                seq = bos + ids0 + eos
                if ids1 is not None:
                    seq += bos + ids1 + eos
            elif ids1 is not None:
                seq = ids0 + ids1
            else:
                seq = ids0
            if not truncate:
                self._eventual_warn_about_too_long_sequence(seq, max_length, verbose)
            out["input_ids"].append(seq)
            lengths.append(len(seq))
            n0 = n_bos + len(ids0) + n_eos
            if return_token_type_ids:
                out["token_type_ids"].append([0] * n0 + [1] * (len(seq) - n0))
            if return_special_tokens_mask:
                mask = [1] * n_bos + [0] * len(ids0) + [1] * n_eos
                if ids1 is not None:
                    mask += [1] * n_bos + [0] * len(ids1) + [1] * n_eos
                out["special_tokens_mask"].append(mask)
            if return_offsets_mapping:
                offs = [zero] * n_bos + off0 + [zero] * n_eos  # type: ignore[operator]
                if ids1 is not None:
                    offs += [zero] * n_bos + off1 + [zero] * n_eos  # type: ignore[operator]
                out["offset_mapping"].append(offs)

        if padding_strategy != PaddingStrategy.DO_NOT_PAD:
            target = max(lengths, default=0) if padding_strategy == PaddingStrategy.LONGEST else max_length
            if target is not None and pad_to_multiple_of and target % pad_to_multiple_of:
                target = (target // pad_to_multiple_of + 1) * pad_to_multiple_of
            side_pad = padding_side if padding_side is not None else self.padding_side
            if side_pad not in ("left", "right"):
                raise ValueError(f"padding_side must be 'left' or 'right', got {side_pad!r}")
            pad_id = self.pad_token_id
            masks = []
            for k, n in enumerate(lengths):
                d = (target - n) if target is not None and n < target else 0
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
        if return_length:
            out["length"] = lengths if batched else [len(out["input_ids"][0])]

        if not batched:
            single = {k: v[0] for k, v in out.items()}
            return BatchEncoding(single, tensor_type=return_tensors, prepend_batch_axis=True)
        return BatchEncoding(out, tensor_type=return_tensors)

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
        text = self._tok.decode(token_ids)
        if clean_up_tokenization_spaces is None:
            clean_up_tokenization_spaces = self.clean_up_tokenization_spaces
        if clean_up_tokenization_spaces:
            text = self.clean_up_tokenization(text)
        return text

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


def _is_regular(tok: Tokenizer, i: int) -> bool:
    try:
        tok.id_to_token(i)
    except (KeyError, ValueError):
        return False
    return i not in tok.special_tokens.values()


# Vocabulary extension: resize a model's embeddings for an extended tokenizer and fill the new rows.
from .extend import resize_model_embeddings as resize_embeddings  # noqa: E402
