#!/usr/bin/env python3
"""Builds a Penn-Treebank-format language-model corpus from WordNet's glosses.

The real PTB (Mikolov's ptb.{train,valid,test}.txt) cannot be shipped with psflow; this script
makes a corpus of the same form from the English text of Debian's wordnet-base package: the
definitions and quoted example sentences of data.noun, data.verb, data.adj and data.adv.

Like PTB's language-model version, text is lower-cased, numbers become N, punctuation is dropped,
clitics ('s, n't, 're, ...) are words of their own, and the vocabulary is the vocab_size words the
reader (worker/data/ptb.h) sees in the train file, <eos> and <unk> among them; every other word
is <unk>. Sentences are de-duplicated, shuffled with a fixed seed and split 85/7.5/7.5, so the
output is the same bytes on every run. Lines are written as PTB writes them: " w1 w2 w3 \\n".

  scripts/make_ptb_corpus.py --out DIR [--wordnet_dir /usr/share/wordnet] [--vocab_size 10000]
                             [--check]

Prints one summary line; with --check it then reads the files back as the reader does and fails
unless the vocabulary has exactly vocab_size words, valid and test hold no word outside it, and
no file is empty. Errors are one line on stderr and exit status 1.
"""

import argparse
import collections
import os
import random
import re
import sys
import time

DEFAULT_WORDNET_DIR = "/usr/share/wordnet"
DATA_FILES = ("data.noun", "data.verb", "data.adj", "data.adv")
SPLITS = ("train", "valid", "test")
SEED = 20240501
VALID_FRACTION = 0.075
TEST_FRACTION = 0.075
MIN_TOKENS = 3
EOS = "<eos>"
UNK = "<unk>"

# A sentence ends at . ! or ? followed by space and a capital or a quote, unless the word before
# the mark is an abbreviation.
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'`])")
ABBREVIATIONS = frozenset(
    "e.g. i.e. etc. vs. cf. viz. al. approx. esp. mr. mrs. ms. dr. st. jr. sr. co. inc. ltd. "
    "no. jan. feb. mar. apr. aug. sept. sep. oct. nov. dec. gen. col. capt. lt. sgt. rev. prof. "
    "mt. ft. ca. b.c. a.d.".split())

# Abbreviations spelled with dots (u.s., e.g.), numbers standing alone (3,000 4.5 1/2), then words
# that may hold hyphens, apostrophes or ampersands inside (coral-red, 3-year-old, don't, at&t).
# Anything else is dropped.
TOKEN = re.compile(r"(?:[a-z]\.){2,}|\d+(?:[.,:/]\d+)*(?![a-z\d'&-])|[a-z\d]+(?:['&-][a-z\d]+)*")
NUMBER = re.compile(r"\d+(?:[.,:/]\d+)*")
CLITIC = re.compile(r"^(.+?)('s|'re|'ve|'ll|'d|'m)$")


class Error(Exception):
    """A failure the user can fix; main prints it as one line."""


def glosses(wordnet_dir):
    """Yields the gloss of each synset, in file order."""
    for name in DATA_FILES:
        path = os.path.join(wordnet_dir, name)
        if not os.path.isfile(path):
            raise Error(f"{path} not found: install wordnet-base (apt-get install wordnet-base) "
                        "or pass --wordnet_dir")
        try:
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if line.startswith("  "):  # the license header
                        continue
                    _, bar, gloss = line.partition(" | ")
                    if bar:
                        yield gloss.strip()
        except (OSError, UnicodeDecodeError) as e:
            raise Error(f"cannot read {path}: {e}") from e


def split_sentences(gloss):
    """The gloss's definitions and examples, cut at ';' and at sentence ends."""
    for part in gloss.split(";"):
        pieces = SENTENCE_END.split(part)
        sentence = ""
        for piece in pieces:
            sentence = f"{sentence} {piece}" if sentence else piece
            words = sentence.split()
            if not words or words[-1].lower().strip("\"'`()") not in ABBREVIATIONS:
                yield sentence
                sentence = ""
        if sentence:
            yield sentence


def tokenize(sentence):
    """PTB language-model tokens of one sentence."""
    tokens = []
    for word in TOKEN.findall(sentence.lower()):
        # Numbers become N, also as parts of hyphenated words: 1-2 is N, 3-year-old N-year-old.
        parts = ["N" if NUMBER.fullmatch(p) else p for p in word.split("-")]
        word = "N" if all(p == "N" for p in parts) else "-".join(parts)
        if word == "N":
            tokens.append("N")
        elif word.endswith("n't") and len(word) > 3:
            tokens += [word[:-3], "n't"]
        elif m := CLITIC.match(word):
            tokens += [m.group(1), m.group(2)]
        else:
            tokens.append(word)
    return tokens


def sentences(wordnet_dir):
    """Unique sentences of >= MIN_TOKENS tokens, in first-seen order."""
    seen = set()
    out = []
    for gloss in glosses(wordnet_dir):
        for text in split_sentences(gloss):
            tokens = tuple(tokenize(text))
            if len(tokens) >= MIN_TOKENS and tokens not in seen:
                seen.add(tokens)
                out.append(tokens)
    return out


def split_corpus(all_sentences):
    shuffled = list(all_sentences)
    random.Random(SEED).shuffle(shuffled)
    n_valid = round(len(shuffled) * VALID_FRACTION)
    n_test = round(len(shuffled) * TEST_FRACTION)
    n_train = len(shuffled) - n_valid - n_test
    return {
        "train": shuffled[:n_train],
        "valid": shuffled[n_train:n_train + n_valid],
        "test": shuffled[n_train + n_valid:],
    }


def vocabulary(train, vocab_size):
    """The vocab_size - 2 most frequent train words (ties in byte order), plus <eos> and <unk>."""
    counts = collections.Counter(w for s in train for w in s)
    keep = vocab_size - 2
    if len(counts) <= keep:
        raise Error(f"the train split has only {len(counts)} distinct words: --vocab_size must be "
                    f"at most {len(counts) + 1} so that some word is <unk>")
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0].encode()))
    return {w for w, _ in ranked[:keep]}


def render(split_sentences_, vocab):
    """The file's bytes, and its (token, <unk>) counts; tokens include one <eos> a line."""
    lines = []
    tokens = unks = 0
    for s in split_sentences_:
        words = [w if w in vocab else UNK for w in s]
        unks += sum(w == UNK for w in words)
        tokens += len(words) + 1
        lines.append(" " + " ".join(words) + " \n")
    return "".join(lines).encode("utf-8"), tokens, unks


def prepare_out_dir(out_dir):
    """Creates out_dir if needed; fails before any work when it cannot be written."""
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise Error(f"cannot create --out {out_dir}: {e.strerror}") from e
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise Error(f"cannot write to --out {out_dir}: permission denied")


def write_atomically(out_dir, contents):
    """Writes every file to a temporary name first, then renames them all into place."""
    temps = []
    try:
        for name, data in contents.items():
            temp = os.path.join(out_dir, f".{name}.tmp{os.getpid()}")
            temps.append((temp, os.path.join(out_dir, name)))
            with open(temp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        for temp, final in temps:
            os.replace(temp, final)
    except OSError as e:
        for temp, _ in temps:
            try:
                os.unlink(temp)
            except OSError:
                pass
        raise Error(f"cannot write to --out {out_dir}: {e.strerror}") from e


def reader_words(path):
    """The words of a file as worker/data/ptb.h reads them (each newline is <eos>)."""
    with open(path, encoding="utf-8") as f:
        return [w for line in f for w in line.split() + ([EOS] if line.endswith("\n") else [])]


def check(out_dir, vocab_size):
    """Verifies the files as the reader will load them; raises Error on the first problem."""
    words = {split: reader_words(os.path.join(out_dir, f"ptb.{split}.txt")) for split in SPLITS}
    for split, ws in words.items():
        if not any(w != EOS for w in ws):
            raise Error(f"check: ptb.{split}.txt holds no words")
    vocab = set(words["train"])
    if len(vocab) != vocab_size:
        raise Error(f"check: the train vocabulary has {len(vocab)} words, not {vocab_size}")
    if UNK not in vocab:
        raise Error(f"check: {UNK} does not occur in ptb.train.txt")
    for split in ("valid", "test"):
        oov = sorted(set(words[split]) - vocab)
        if oov:
            raise Error(f"check: ptb.{split}.txt holds {len(oov)} words outside the train "
                        f"vocabulary, e.g. {oov[0]!r}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="directory for ptb.{train,valid,test}.txt")
    parser.add_argument("--wordnet_dir", default=DEFAULT_WORDNET_DIR,
                        help="WordNet's dict directory (wordnet-base installs it in %(default)s)")
    parser.add_argument("--vocab_size", type=int, default=10000,
                        help="words in the reader's vocabulary, <eos> and <unk> included")
    parser.add_argument("--check", action="store_true",
                        help="read the output back and fail unless it is a well-formed corpus")
    args = parser.parse_args()
    if args.vocab_size < 3:
        parser.error("--vocab_size must be at least 3 (<eos>, <unk> and one word)")

    start = time.monotonic()
    prepare_out_dir(args.out)
    parts = split_corpus(sentences(args.wordnet_dir))
    vocab = vocabulary(parts["train"], args.vocab_size)
    contents, stats = {}, {}
    for split in SPLITS:
        contents[f"ptb.{split}.txt"], tokens, unks = render(parts[split], vocab)
        stats[split] = (len(parts[split]), tokens, unks)
    write_atomically(args.out, contents)
    if args.check:
        check(args.out, args.vocab_size)
    seconds = time.monotonic() - start

    sizes = ", ".join(f"{split} {n} sentences / {tokens} words" for split, (n, tokens, _) in
                      stats.items())
    oov = " ".join(f"{split} {100 * unks / (tokens - n):.2f}%" for split, (n, tokens, unks) in
                   stats.items())
    print(f"make_ptb_corpus: {sizes} (words include one <eos> a sentence); vocabulary "
          f"{args.vocab_size}; <unk> rate {oov}; {'checked; ' if args.check else ''}wrote "
          f"{args.out} in {seconds:.1f} s")


if __name__ == "__main__":
    try:
        main()
    except Error as e:
        print(f"make_ptb_corpus: error: {e}", file=sys.stderr)
        sys.exit(1)
