//! The refined selection of CNF (issue 13; measured in `docs/results/selection.md`): counting
//! and MCE as in the paper, but the cut from the raw vocabulary to `k` tokens is made in steps,
//! each one re-measuring usage with the vocabulary it leaves.
//!
//! The paper (and [`SelectionRule::Paper`], the reference setting) keeps the `k` tokens used most
//! when the training text is encoded once with the raw vocabulary. That usage is measured with a
//! vocabulary many times larger than the result: the occurrences of a sub-word or a character
//! are taken by the longer candidates that contain it, so the cut drops it, and once those
//! longer candidates are cut too the text falls back to shorter pieces or to bytes. It costs
//! most where words are individually rare (small and morphologically rich languages) and on
//! scripts with multi-byte characters.
//!
//! [`SelectionRule::Refined`]:
//!
//! 1. *Character coverage.* From the counts of every multi-byte character (counting keeps them
//!    beside the `raw_vocab_size` cut: [`Counter::char_counts`](crate::Counter::char_counts);
//!    from counts given to the trainer, every character among them), the most frequent ones
//!    until they cover [`CHAR_COVERAGE`] of all multi-byte character occurrences, at most
//!    [`CHAR_COVERAGE_SHARE`] of `k` (and at most `k - 256`), are kept at every step before any
//!    other multi-byte token. Covered characters below the raw vocabulary's cut join the raw
//!    vocabulary (with their counts) before the filtering pass.
//! 2. *Refining passes.* After the filtering pass, the vocabulary is cut to
//!    `REFINE_STEPS[0] * k` tokens, the training text is encoded again with it and usage counted
//!    again; then `REFINE_STEPS[1] * k`, and so on; the last cut goes to `k`. A step that would
//!    not remove any token is skipped.
//! 3. *Tokens saved.* Each cut keeps the tokens with the highest `usage(t) * (alt(t) - 1)`,
//!    where `alt(t)` is the number of tokens the current vocabulary needs to spell `t` without
//!    `t` itself (the best split into two MCE encodings at a character boundary; a single
//!    character needs its UTF-8 bytes). `alt` is computed for the `2 * keep` most used tokens and
//!    every used multi-byte character; the other used tokens get the lower bound `usage(t)`.
//!    Ties by bytes; unused tokens last, in the order of the current vocabulary (counting rank
//!    for the raw one).
//!
//! 4. *Script shares* ([`SelectionRule::RefinedScripts`] only). Every token gets the script of
//!    its characters (Common and Inherited ones: spaces, digits, punctuation, combining marks, do
//!    not count; a token with none, with two scripts, or not valid UTF-8 has none). The *mass*
//!    of a script is the usage of its tokens in the pass just made (the tokens its text needs);
//!    a token of script `s` has its usage and its score multiplied by
//!    `(mass of the largest script / mass of s) ^ SCRIPT_SHARE_EXPONENT` (tokens of the largest
//!    script and tokens without a script: 1), both in the choice of the `2 * keep` exact tokens
//!    and in the cut. Tokens saved on a script that is a small share of the text count more, as
//!    multilingual models sample languages by a power of their share.
//!
//! 5. *ASCII share* ([`SelectionRule::RefinedNonAscii`] only; instead of step 4). Every token is
//!    either ASCII (every byte below 0x80) or not. The *mass* of each of the two groups is the
//!    usage of its tokens in the pass just made; the tokens of the smaller group have their usage
//!    and their score multiplied by `(larger mass / smaller mass) ^ NON_ASCII_SHARE_EXPONENT`
//!    (the larger group's tokens, and both when the masses are equal: 1), in the choice of the
//!    `2 * keep` exact tokens and in the cut. On a mix dominated by ASCII text (English, science,
//!    maths, code and the ASCII words of Latin-script languages) the ids it moves come from ASCII
//!    tokens and go to every multi-byte script at once: Han, Cyrillic, Greek, Hangul, and the
//!    Latin words with diacritics (`docs/results/frontier.md` measured which donors cost least).
//!
//! 6. *Fallback prefixes* ([`SelectionRule::RefinedNonAscii`] only). A character that has no
//!    token is spelled by its UTF-8 bytes: 3 tokens for a Han or Hangul character where a
//!    byte-level BPE, which learns the byte pairs that begin characters, needs 2. So every
//!    character of 3 or 4 bytes among the counted characters adds to the raw vocabulary every
//!    proper prefix of its bytes of at least 2 bytes (the first 2 bytes of a 3-byte character;
//!    the first 2 and the first 3 of a 4-byte one; not valid UTF-8), each counted with the summed
//!    counts of the characters that begin with it, whether the raw vocabulary has those
//!    characters or not: a character the raw vocabulary has can still be cut by a later step, and
//!    its prefix then spells it. The cuts keep the prefixes by their tokens saved like any other
//!    token (`alt` of a token that is not valid UTF-8 splits it at every byte; a prefix no text
//!    needs yet is unused and ranks among the unused tokens by its count, so it survives a cut
//!    that has room for it). A character without a token can then cost 2 tokens, a 4-byte one 2
//!    or 3. There are at most a few thousand such prefixes: at most 1,024 lead byte pairs of
//!    3-byte characters and 320 of 4-byte ones, and one 3-byte prefix per block of 64 code points
//!    among the 4-byte characters counted.
//!    MCE is unchanged: a prefix is a token inside one unit (`docs/results/byte_fallback.md`
//!    measured the prefixes of the characters the raw vocabulary lacks, and
//!    `docs/results/script_balance_128k.md` the prefixes of every character, kept).
//!
//! The ids of every intermediate and of the final vocabulary are ordered by the usage of the
//! pass that was just made, most used first, ties by bytes (SPEC section 4's order).

use std::collections::{HashMap, HashSet};

use unicode_script::{Script, UnicodeScript};

use rayon::prelude::*;

use crate::error::Error;
use crate::filter::Selected;
use crate::mce::{Encoder, Scratch};

/// How the final vocabulary is chosen from the counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SelectionRule {
    /// The paper's: one filtering pass over the raw vocabulary, the `k` most used tokens (the
    /// default: SPEC section 4).
    #[default]
    Paper,
    /// Character coverage, refining passes and tokens saved (module documentation).
    Refined,
    /// [`SelectionRule::Refined`] with every script's tokens saved normalised by the script's
    /// share of the pass's usage (module documentation, step 4).
    RefinedScripts,
    /// [`SelectionRule::Refined`] with the tokens saved of the smaller of the ASCII and non-ASCII
    /// groups weighted up by the ratio of their usage (module documentation, step 5), and the
    /// fallback prefixes in the raw vocabulary (step 6).
    RefinedNonAscii,
}

impl SelectionRule {
    /// `"paper"`, `"refined"`, `"refined-scripts"` or `"refined-non-ascii"`.
    pub fn parse(name: &str) -> Result<Self, Error> {
        match name {
            "paper" => Ok(SelectionRule::Paper),
            "refined" => Ok(SelectionRule::Refined),
            "refined-scripts" => Ok(SelectionRule::RefinedScripts),
            "refined-non-ascii" => Ok(SelectionRule::RefinedNonAscii),
            _ => Err(Error::Value(format!(
                "selection must be 'paper', 'refined', 'refined-scripts' or 'refined-non-ascii', got {name:?}"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SelectionRule::Paper => "paper",
            SelectionRule::Refined => "refined",
            SelectionRule::RefinedScripts => "refined-scripts",
            SelectionRule::RefinedNonAscii => "refined-non-ascii",
        }
    }

    /// Whether the rule makes refining passes (every rule but the paper's).
    pub fn refines(self) -> bool {
        self != SelectionRule::Paper
    }

    /// Whether the raw vocabulary gets the fallback prefixes (module documentation, step 6).
    pub fn fallback_prefixes(self) -> bool {
        self == SelectionRule::RefinedNonAscii
    }
}

/// The sizes of the refining passes' vocabularies, as multiples of the regular tokens `k`.
pub const REFINE_STEPS: [f64; 3] = [2.0, 1.4, 1.15];

/// Share of all multi-byte character occurrences (in the counts) that the covered characters
/// reach.
pub const CHAR_COVERAGE: f64 = 0.9997;

/// At most this share of the regular tokens goes to covered characters.
pub const CHAR_COVERAGE_SHARE: f64 = 1.0 / 16.0;

/// The exponent of the script normalisation of [`SelectionRule::RefinedScripts`] (module
/// documentation, step 4).
pub const SCRIPT_SHARE_EXPONENT: f64 = 0.25;

/// The exponent of the ASCII / non-ASCII normalisation of [`SelectionRule::RefinedNonAscii`]
/// (module documentation, step 5).
pub const NON_ASCII_SHARE_EXPONENT: f64 = 0.5;

/// The largest exponent of step 5 a training run accepts (`TrainConfig::non_ascii_exponent`).
pub const MAX_NON_ASCII_EXPONENT: f64 = 4.0;

/// The script of a token (module documentation, step 4): the one script of its characters that
/// are neither Common nor Inherited; `None` without such a character, with two scripts, or for
/// bytes that are not UTF-8.
pub fn token_script(t: &[u8]) -> Option<Script> {
    let s = std::str::from_utf8(t).ok()?;
    let mut found = None;
    for c in s.chars() {
        let sc = c.script();
        if matches!(sc, Script::Common | Script::Inherited | Script::Unknown) {
            continue;
        }
        match found {
            None => found = Some(sc),
            Some(f) if f == sc => {}
            Some(_) => return None,
        }
    }
    found
}

/// The weight of every id of `vocab` (module documentation, step 4) from the usage of the pass
/// just made, indexed by id.
pub fn script_weights(vocab: &crate::vocab::Vocab, usage: &[u64]) -> Vec<f64> {
    let mut script = vec![None; usage.len()];
    let mut mass: HashMap<Script, u64> = HashMap::new();
    for (id, tok) in vocab.iter() {
        if let Some(s) = token_script(tok) {
            script[id as usize] = Some(s);
            *mass.entry(s).or_default() += usage[id as usize];
        }
    }
    let top = mass.values().copied().max().unwrap_or(0) as f64;
    script
        .into_iter()
        .map(|s| match s.map(|s| mass[&s]) {
            Some(m) if m > 0 => (top / m as f64).powf(SCRIPT_SHARE_EXPONENT),
            _ => 1.0,
        })
        .collect()
}

/// The weight of every id of `vocab` (module documentation, step 5) from the usage of the pass
/// just made, indexed by id; `exponent`: [`NON_ASCII_SHARE_EXPONENT`] unless the run gives
/// another.
pub fn non_ascii_weights(vocab: &crate::vocab::Vocab, usage: &[u64], exponent: f64) -> Vec<f64> {
    let mut ascii = vec![true; usage.len()];
    let (mut mass_a, mut mass_n) = (0u128, 0u128);
    for (id, tok) in vocab.iter() {
        let a = tok.is_ascii();
        ascii[id as usize] = a;
        if a {
            mass_a += usage[id as usize] as u128;
        } else {
            mass_n += usage[id as usize] as u128;
        }
    }
    let (lo, hi) = (mass_a.min(mass_n), mass_a.max(mass_n));
    let w = if lo > 0 && hi > lo { (hi as f64 / lo as f64).powf(exponent) } else { 1.0 };
    // the smaller group is weighted (ASCII when the text is mostly multi-byte)
    let weighted_ascii = mass_a < mass_n;
    ascii.into_iter().map(|a| if a == weighted_ascii { w } else { 1.0 }).collect()
}

/// `x * w`, rounded (exactly `x` for `w = 1`).
fn scaled(x: u64, w: f64) -> u64 {
    if w == 1.0 {
        x
    } else {
        (x as f64 * w).round() as u64
    }
}

/// The size of the vocabulary after refining step `step` for `k` regular tokens.
pub fn step_size(step: usize, k: usize) -> usize {
    (REFINE_STEPS[step] * k as f64).round() as usize
}

/// Whether `t` is exactly one UTF-8 character of 2 to 4 bytes.
pub(crate) fn one_multibyte_char(t: &[u8]) -> bool {
    (2..=4).contains(&t.len()) && std::str::from_utf8(t).map(|s| s.chars().count() == 1).unwrap_or(false)
}

/// The covered characters (module documentation, step 1) of counts `counts` for `k` regular
/// tokens, sorted by bytes.
pub fn covered_characters(counts: &[(Vec<u8>, u64)], k: usize) -> Vec<Vec<u8>> {
    let mut chars: Vec<(&[u8], u64)> =
        counts.iter().filter(|(t, c)| *c > 0 && one_multibyte_char(t)).map(|(t, c)| (t.as_slice(), *c)).collect();
    chars.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let total: u128 = chars.iter().map(|c| c.1 as u128).sum();
    let cap = ((k as f64 * CHAR_COVERAGE_SHARE) as usize).min(k.saturating_sub(256));
    let goal = CHAR_COVERAGE * total as f64;
    let mut out = Vec::new();
    let mut acc: u128 = 0;
    for (t, c) in chars {
        if acc as f64 >= goal || out.len() >= cap {
            break;
        }
        out.push(t.to_vec());
        acc += c as u128;
    }
    out.sort_unstable();
    out
}

/// The fallback prefixes (module documentation, step 6) of the characters `chars` (with their
/// counts): every proper prefix of at least 2 bytes of each character of 3 or 4 bytes, counted
/// with the summed counts of the characters that begin with it, but those already in `have` (the
/// raw vocabulary's tokens: never twice), sorted by bytes.
pub fn fallback_prefixes(chars: &[(Vec<u8>, u64)], have: &HashSet<&[u8]>) -> Vec<(Vec<u8>, u64)> {
    let mut acc: HashMap<&[u8], u64> = HashMap::new();
    for (t, c) in chars {
        if t.len() >= 3 && *c > 0 && one_multibyte_char(t) {
            for n in 2..t.len() {
                *acc.entry(&t[..n]).or_default() += c;
            }
        }
    }
    let mut out: Vec<(Vec<u8>, u64)> =
        acc.into_iter().filter(|(p, _)| !have.contains(p)).map(|(p, c)| (p.to_vec(), c)).collect();
    out.sort_unstable();
    out
}

/// Tokens the encoder needs to spell `tok` without the token `tok` itself (module
/// documentation, step 3).
pub(crate) fn alt_cost(enc: &Encoder, tok: &[u8], scratch: &mut Scratch, out: &mut Vec<u32>) -> u64 {
    let cuts: Vec<usize> = match std::str::from_utf8(tok) {
        Ok(s) => {
            if s.chars().nth(1).is_none() {
                return tok.len() as u64;
            }
            s.char_indices().map(|(i, _)| i).filter(|&i| i > 0).collect()
        }
        Err(_) => (1..tok.len()).collect(),
    };
    let mut best = u64::MAX;
    for p in cuts {
        out.clear();
        enc.encode_into(&tok[..p], scratch, out);
        enc.encode_into(&tok[p..], scratch, out);
        best = best.min(out.len() as u64);
    }
    best
}

/// The score of every id of the encoder's vocabulary (module documentation, step 3) for a cut
/// to `keep` tokens, given the usage of the pass just made; with `weight` (indexed by id: step 4)
/// usage and score are weighted.
pub fn saved_scores(enc: &Encoder, usage: &[u64], keep: usize, weight: Option<&[f64]>) -> Vec<u64> {
    let vocab = enc.vocab();
    let w = |id: u32| weight.map_or(1.0, |w| w[id as usize]);
    let mut by_usage: Vec<(u32, u64)> = vocab
        .iter()
        .filter(|(_, t)| t.len() > 1)
        .map(|(id, _)| (id, scaled(usage[id as usize], w(id))))
        .filter(|x| x.1 > 0)
        .collect();
    by_usage.par_sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let top = (2 * keep).min(by_usage.len());
    let mut exact: Vec<u32> = by_usage[..top].iter().map(|x| x.0).collect();
    let in_top: HashSet<u32> = exact.iter().copied().collect();
    exact.extend(by_usage[top..].iter().map(|x| x.0).filter(|&id| {
        !in_top.contains(&id) && one_multibyte_char(vocab.token(id).expect("an id of the vocabulary"))
    }));
    let mut score = vec![0u64; usage.len()];
    for &(id, u) in &by_usage[top..] {
        score[id as usize] = u; // lower bound: alt >= 2 (u is the weighted usage)
    }
    let exact_scores: Vec<(u32, u64)> = exact
        .par_iter()
        .map_init(
            || (Scratch::default(), Vec::new()),
            |(scratch, out), &id| {
                let tok = vocab.token(id).expect("an id of the vocabulary");
                let alt = alt_cost(enc, tok, scratch, out);
                (id, scaled(usage[id as usize].saturating_mul(alt.saturating_sub(1)), w(id)))
            },
        )
        .collect();
    for (id, s) in exact_scores {
        score[id as usize] = s;
    }
    score
}

/// The `keep` tokens of a cut (all single bytes, the covered characters present in the
/// vocabulary, then the best scores; module documentation), in id order: usage descending, ties
/// by bytes.
pub fn choose(enc: &Encoder, usage: &[u64], score: &[u64], keep: usize, covered: &HashSet<Vec<u8>>) -> Result<Vec<Selected>, Error> {
    if keep < 256 {
        return Err(Error::Value(format!(
            "the vocabulary needs at least 256 regular tokens (one per byte), asked for {keep}"
        )));
    }
    let vocab = enc.vocab();
    let mut chosen = Vec::with_capacity(keep);
    let mut rest = Vec::new();
    for (id, tok) in vocab.iter() {
        let s = Selected { token: tok.to_vec(), usage: usage[id as usize], raw_id: id };
        if tok.len() == 1 {
            chosen.push(s);
        } else {
            rest.push((!covered.contains(tok), score[id as usize], s));
        }
    }
    // covered characters first; then the best score, ties by bytes; unused (score 0) in
    // vocabulary order
    rest.par_sort_unstable_by(|a, b| {
        a.0.cmp(&b.0).then_with(|| match (a.1, b.1) {
            (0, 0) => a.2.raw_id.cmp(&b.2.raw_id),
            _ => b.1.cmp(&a.1).then_with(|| a.2.token.cmp(&b.2.token)),
        })
    });
    let room = keep.saturating_sub(chosen.len());
    chosen.extend(rest.into_iter().take(room).map(|x| x.2));
    chosen.par_sort_unstable_by(|a, b| b.usage.cmp(&a.usage).then_with(|| a.token.cmp(&b.token)));
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Options;
    use crate::vocab::Vocab;

    fn encoder(extra: &[&str]) -> Encoder {
        let mut toks: Vec<Vec<u8>> = extra.iter().map(|s| s.as_bytes().to_vec()).collect();
        let missing: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).filter(|b| !toks.contains(b)).collect();
        toks.extend(missing);
        let entries = toks.into_iter().enumerate().map(|(i, t)| (i as u32, t)).collect();
        Encoder::new(Vocab::new(entries).unwrap(), Options::default())
    }

    #[test]
    fn names() {
        assert_eq!(SelectionRule::parse("paper").unwrap(), SelectionRule::Paper);
        assert_eq!(SelectionRule::parse("refined").unwrap().name(), "refined");
        assert_eq!(SelectionRule::parse("refined-scripts").unwrap(), SelectionRule::RefinedScripts);
        assert_eq!(SelectionRule::RefinedScripts.name(), "refined-scripts");
        assert!(SelectionRule::RefinedScripts.refines() && !SelectionRule::Paper.refines());
        assert!(SelectionRule::parse("Paper").is_err());
        assert_eq!(SelectionRule::default(), SelectionRule::Paper);
    }

    #[test]
    fn scripts_and_weights() {
        assert_eq!(token_script(b" the"), Some(Script::Latin));
        assert_eq!(token_script("中文，".as_bytes()), Some(Script::Han));
        assert_eq!(token_script("\u{3b1}\u{301}".as_bytes()), Some(Script::Greek)); // Inherited mark
        assert_eq!(token_script(b"  12"), None);
        assert_eq!(token_script("aα".as_bytes()), None);
        assert_eq!(token_script(&[0xe4, 0xb8]), None);
        // Latin tokens used 400 times in all, Greek 100, Han 0 (unused): Greek x (400/100)^e
        let enc = encoder(&["ab", "cd", "αβ", "γ", "中", "  "]);
        let mut usage = vec![0u64; enc.vocab().len()];
        usage[0] = 300;
        usage[1] = 100;
        usage[2] = 60;
        usage[3] = 40;
        usage[5] = 7;
        let w = script_weights(enc.vocab(), &usage);
        let g = 4f64.powf(SCRIPT_SHARE_EXPONENT);
        assert_eq!(&w[..6], &[1.0, 1.0, g, g, 1.0, 1.0]);
        let b = enc.vocab().iter().find(|(_, t)| t == b"b").unwrap().0 as usize;
        assert_eq!(w[b], 1.0); // a Latin byte: weight 1 like its script
        // weighted scores: g times the plain ones for the Greek tokens, the same for the Latin ones
        let sc = saved_scores(&enc, &usage, 10, Some(&w));
        let plain = saved_scores(&enc, &usage, 10, None);
        assert_eq!(sc[2], (plain[2] as f64 * g).round() as u64);
        assert_eq!(sc[0], plain[0]);
        assert_eq!(sc[3], (plain[3] as f64 * g).round() as u64);
        assert!(sc[2] > plain[2]);
        assert_eq!(scaled(5, 1.5), 8);
        assert_eq!(scaled(u64::MAX, 1.0), u64::MAX);
    }

    #[test]
    fn non_ascii_share() {
        let enc = encoder(&["ab", "cd", "αβ", "中", "  "]);
        let id = |t: &[u8]| enc.vocab().iter().find(|(_, x)| *x == t).unwrap().0 as usize;
        let mut usage = vec![0u64; enc.vocab().len()];
        usage[0] = 300; // ASCII 300 + 60 + 40 = 400
        usage[4] = 60;
        usage[id(b"x")] = 40;
        usage[2] = 75; // non-ASCII 75 + 25 = 100
        usage[3] = 25;
        let w = non_ascii_weights(enc.vocab(), &usage, NON_ASCII_SHARE_EXPONENT);
        let g = 4f64.powf(NON_ASCII_SHARE_EXPONENT);
        assert_eq!(&w[..5], &[1.0, 1.0, g, g, 1.0]);
        assert_eq!((w[id(&[0xe4])], w[id(b"x")]), (g, 1.0)); // a high byte is non-ASCII
        // the exponent of the run: 1 weighs the smaller group by the whole ratio, 0 not at all
        assert_eq!(&non_ascii_weights(enc.vocab(), &usage, 1.0)[..5], &[1.0, 1.0, 4.0, 4.0, 1.0]);
        assert!(non_ascii_weights(enc.vocab(), &usage, 0.0).iter().all(|&x| x == 1.0));
        // mostly multi-byte text: the ASCII tokens are weighted
        usage[2] = 1600;
        let w = non_ascii_weights(enc.vocab(), &usage, NON_ASCII_SHARE_EXPONENT);
        let g = (1625f64 / 400.0).powf(NON_ASCII_SHARE_EXPONENT);
        assert_eq!(&w[..5], &[g, g, 1.0, 1.0, g]);
        // equal masses, or no text of one group: no weight
        usage[2] = 375;
        assert!(non_ascii_weights(enc.vocab(), &usage, NON_ASCII_SHARE_EXPONENT).iter().all(|&x| x == 1.0));
        let zero = vec![0u64; usage.len()];
        assert!(non_ascii_weights(enc.vocab(), &zero, NON_ASCII_SHARE_EXPONENT).iter().all(|&x| x == 1.0));
        assert_eq!(SelectionRule::parse("refined-non-ascii").unwrap(), SelectionRule::RefinedNonAscii);
        assert_eq!(SelectionRule::RefinedNonAscii.name(), "refined-non-ascii");
        assert!(SelectionRule::RefinedNonAscii.refines());
    }

    #[test]
    fn prefixes_of_every_character() {
        let c = |s: &str, n| (s.as_bytes().to_vec(), n);
        // 中 (e4 b8 ad) and 丫 (e4 b8 ab) share a prefix; é has 2 bytes (its prefix would be one
        // byte: none); 😀 (f0 9f 98 80) and 😁 (f0 9f 98 81) give f0 9f 98 and f0 9f, 𠀀 (f0 a0
        // 80 80) f0 a0 80 and f0 a0; 文 (e6 96 87) is in the raw vocabulary and still gives its
        // prefix; 字 has count 0; the prefix e5 ad (of 孩, e5 ad a9) is in the raw vocabulary already
        let chars = vec![
            c("中", 5),
            c("丫", 2),
            c("é", 9),
            c("😀", 4),
            c("😁", 1),
            c("𠀀", 3),
            c("文", 7),
            c("字", 0),
            c("孩", 6),
        ];
        let have: HashSet<&[u8]> = ["文".as_bytes(), &[0xe5, 0xad]].into_iter().collect();
        let got = fallback_prefixes(&chars, &have);
        let want: Vec<(Vec<u8>, u64)> = vec![
            (vec![0xe4, 0xb8], 7),
            (vec![0xe6, 0x96], 7),
            (vec![0xf0, 0x9f], 5),
            (vec![0xf0, 0x9f, 0x98], 5),
            (vec![0xf0, 0xa0], 3),
            (vec![0xf0, 0xa0, 0x80], 3),
        ];
        assert_eq!(got, want);
        assert!(got.iter().all(|(p, _)| std::str::from_utf8(p).is_err()));
        assert!(fallback_prefixes(&chars[2..3], &HashSet::new()).is_empty());
        assert!(SelectionRule::RefinedNonAscii.fallback_prefixes());
        assert!(!SelectionRule::Refined.fallback_prefixes() && !SelectionRule::Paper.fallback_prefixes());
        assert!(!SelectionRule::RefinedScripts.fallback_prefixes());
        // a prefix saves one token per character spelled with it
        let enc = encoder(&[std::str::from_utf8(&[0x61]).unwrap()]);
        let (mut s, mut o) = (Scratch::default(), Vec::new());
        assert_eq!(alt_cost(&enc, &[0xe4, 0xb8], &mut s, &mut o), 2);
    }

    #[test]
    fn alternative_costs() {
        let enc = encoder(&["the", " cat", "th", "e ", "中文", "中"]);
        let (mut s, mut o) = (Scratch::default(), Vec::new());
        // "the" without itself: "th" + "e"
        assert_eq!(alt_cost(&enc, b"the", &mut s, &mut o), 2);
        // " cat": no token for any of its proper pieces but " ", so every split costs 4 bytes
        assert_eq!(alt_cost(&enc, b" cat", &mut s, &mut o), 4);
        // a character alone costs its bytes; "中文" = "中" + "文" (3 bytes)
        assert_eq!(alt_cost(&enc, "中".as_bytes(), &mut s, &mut o), 3);
        assert_eq!(alt_cost(&enc, "中文".as_bytes(), &mut s, &mut o), 4);
    }

    #[test]
    fn coverage_by_share_and_cap() {
        let c = |s: &str, n| (s.as_bytes().to_vec(), n);
        let counts = vec![c("中", 900), c("文", 90), c("字", 9), c("ab", 5000), c("中文", 800), c("é", 1)];
        // 99.97% of the 1000 character occurrences needs all four characters (multi-byte only)
        assert_eq!(covered_characters(&counts, 2000).len(), 4);
        // the room beside the 256 bytes binds: k = 258 leaves two, the most frequent
        assert_eq!(covered_characters(&counts, 258), vec!["中".as_bytes().to_vec(), "文".as_bytes().to_vec()]);
        assert!(covered_characters(&counts, 256).is_empty());
        // the share binds: 40 characters, k = 320 allows 320 / 16 = 20
        let many: Vec<(Vec<u8>, u64)> =
            (0..40u32).map(|i| (char::from_u32(0x4E00 + i).unwrap().to_string().into_bytes(), 1000 - i as u64)).collect();
        let cov = covered_characters(&many, 320);
        assert_eq!(cov.len(), 20);
        assert!(cov.contains(&"\u{4E00}".as_bytes().to_vec()) && !cov.contains(&"\u{4E27}".as_bytes().to_vec()));
        // the share of occurrences binds: a long tail of rare characters is left out
        let mut tail = many.clone();
        tail.extend((0..40u32).map(|i| (char::from_u32(0x5000 + i).unwrap().to_string().into_bytes(), 1)));
        assert_eq!(covered_characters(&tail, 100_000).len(), 40 + 29);
    }

    #[test]
    fn scores_and_choice() {
        let enc = encoder(&["the", "th", "中", "文字", "xyz"]);
        let n = enc.vocab().len();
        let mut usage = vec![0u64; n];
        usage[0] = 10; // "the": alt 2 ("th" + "e") -> 10
        usage[1] = 3; // "th": beyond the 2 * keep most used: lower bound 3
        usage[2] = 4; // "中": a character, always exact: alt 3 bytes -> 8
        usage[3] = 1; // "文字": lower bound 1
        usage[4] = 2; // "xyz": lower bound 2 (its exact alt would be 3 bytes -> 4)
        let sc = saved_scores(&enc, &usage, 1, None);
        assert_eq!(&sc[..5], &[10, 3, 8, 1, 2]);
        // with a larger cut all are exact
        assert_eq!(&saved_scores(&enc, &usage, 3, None)[..5], &[10, 3, 8, 5, 4]); // "文字": 3 + 3 bytes
        // keep 258: the 256 bytes, then "the" and "中" (by score), ids by usage
        let sel = choose(&enc, &usage, &sc, 258, &HashSet::new()).unwrap();
        assert_eq!(sel.len(), 258);
        assert_eq!(sel[0].token, b"the");
        assert_eq!(sel[1].token, "中".as_bytes());
        // a covered token is kept whatever its score
        let cov: HashSet<Vec<u8>> = ["文字".as_bytes().to_vec()].into_iter().collect();
        let sel = choose(&enc, &usage, &sc, 258, &cov).unwrap();
        let toks: Vec<&[u8]> = sel.iter().map(|s| s.token.as_slice()).collect();
        assert!(toks.contains(&"文字".as_bytes()) && toks.contains(&b"the".as_slice()));
        assert!(!toks.contains(&"中".as_bytes()));
        assert!(choose(&enc, &usage, &sc, 255, &cov).is_err());
    }
}
