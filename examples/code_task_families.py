"""The task families of ``examples/make_code_tasks.py``: short Python functions a ~135M model writes sometimes.

A family is a function ``draw(rng) -> Spec``: it picks the instance's parameters (function name, a constant, a
character, a threshold, a word) with ``rng`` and returns the function's signature, what it must return (one
clause, completing "Write a Python function `f(x)` that ..."), a correct reference ``def`` with the parameters
written in, and candidate inputs (tuples of arguments; the expected values come from running the reference).
``pairs`` families return few distinct values (booleans, one of two arguments, a sign): their tests each compare
two calls with different expected values, so a constant or an echoed argument passes none of them.

:data:`TRAIN_FAMILIES` are the training families, :data:`HELDOUT_FAMILIES` the families never trained on.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import NamedTuple


class Spec(NamedTuple):
    """One drawn instance of a family (see the module docstring)."""

    name: str
    signature: str
    what: str
    reference: str
    inputs: list[tuple]
    pairs: bool = False


WORDS = (
    "apple", "river", "stone", "green", "table", "cloud", "music", "light", "house", "water", "tiger", "bread",
    "plant", "chair", "smile", "dream", "ocean", "paper", "grape", "train", "mouse", "lemon", "bird", "moon",
    "star", "fish", "tree", "book", "cat", "dog", "sun", "sky", "road", "rain", "snow", "wind", "code", "game",
)
PALINDROMES = ("level", "radar", "noon", "civic", "kayak", "refer", "madam", "racecar", "rotor", "stats", "deed",
               "peep", "wow", "solos", "tenet", "pop")


def _words(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.sample(WORDS, rng.randint(low, high)))


def _nums(rng: random.Random, low: int = -9, high: int = 20, size: tuple[int, int] = (3, 6)) -> list[int]:
    return [rng.randint(low, high) for _ in range(rng.randint(*size))]


def _pick(rng: random.Random, *names: str) -> str:
    return rng.choice(names)


# Training families


def add_const(rng: random.Random) -> Spec:
    k = rng.randint(2, 30)
    name = _pick(rng, f"add_{k}", "add_const", "plus_k", "increase")
    return Spec(name, "x", f"returns the number x plus {k}", f"def {name}(x):\n    return x + {k}\n",
                [(rng.randint(-40, 60),) for _ in range(10)])


def max_of_two(rng: random.Random) -> Spec:
    big = rng.random() < 0.5
    name = _pick(rng, "bigger", "max_of_two", "larger") if big else _pick(rng, "smaller", "min_of_two", "lesser")
    word, fn = ("larger", "max") if big else ("smaller", "min")
    pairs = [tuple(rng.sample(range(-20, 50), 2)) for _ in range(12)]
    return Spec(name, "a, b", f"returns the {word} of the two numbers a and b",
                f"def {name}(a, b):\n    return {fn}(a, b)\n", pairs, pairs=True)


def abs_diff(rng: random.Random) -> Spec:
    name = _pick(rng, "abs_diff", "distance", "gap")
    return Spec(name, "a, b", "returns the absolute difference between the numbers a and b (never negative)",
                f"def {name}(a, b):\n    return abs(a - b)\n",
                [tuple(rng.sample(range(-30, 60), 2)) for _ in range(10)])


def sum_list(rng: random.Random) -> Spec:
    name = _pick(rng, "sum_list", "total", "list_sum")
    return Spec(name, "nums", "returns the sum of the numbers in the list nums",
                f"def {name}(nums):\n    return sum(nums)\n", [(_nums(rng, -5, 30),) for _ in range(10)])


def count_vowels(rng: random.Random) -> Spec:
    name = _pick(rng, "count_vowels", "vowel_count", "num_vowels")
    return Spec(name, "s", "returns how many vowels (a, e, i, o, u) the lowercase string s contains",
                f"def {name}(s):\n    return sum(1 for c in s if c in 'aeiou')\n",
                [(_words(rng, 1, 3),) for _ in range(10)])


def reverse_words(rng: random.Random) -> Spec:
    name = _pick(rng, "reverse_words", "flip_words", "backwards_words")
    return Spec(name, "s", "returns the words of the string s in reverse order, separated by single spaces",
                f"def {name}(s):\n    return ' '.join(s.split()[::-1])\n",
                [(_words(rng, 2, 4),) for _ in range(10)])


def clamp(rng: random.Random) -> Spec:
    low = rng.randint(-10, 10)
    high = low + rng.randint(5, 30)
    name = _pick(rng, "clamp", "limit", "clip_value")
    return Spec(name, "x", f"returns x limited to the range {low} to {high}: {low} if x is below {low}, {high} if x is "
                f"above {high}, else x", f"def {name}(x):\n    return max({low}, min({high}, x))\n",
                [(rng.randint(low - 30, high + 30),) for _ in range(16)])


def fizzbuzz(rng: random.Random) -> Spec:
    a, b = rng.sample((2, 3, 5, 7), 2)
    w1, w2 = rng.sample(("Fizz", "Buzz", "Zap", "Pop", "Boom"), 2)
    name = _pick(rng, "fizzbuzz", "label", "say")
    ref = (f"def {name}(n):\n    if n % {a} == 0:\n        return '{w1}'\n    if n % {b} == 0:\n        return '{w2}'\n"
           "    return str(n)\n")
    inputs = [(n,) for n in rng.sample(range(1, 80), 14) if n % (a * b)]  # never both: the rule order is not tested
    return Spec(name, "n", f"returns '{w1}' if n is divisible by {a}, '{w2}' if n is divisible by {b}, and "
                "otherwise n as a string", ref, inputs)


def running_max(rng: random.Random) -> Spec:
    name = _pick(rng, "running_max", "max_so_far", "prefix_max")
    ref = (f"def {name}(nums):\n    out = []\n    for x in nums:\n        out.append(x if not out else max(out[-1], x))\n"
           "    return out\n")
    return Spec(name, "nums", "returns a list of the same length where each item is the largest number seen so far "
                "in nums", ref, [(_nums(rng, 0, 20, (4, 6)),) for _ in range(10)])


def is_palindrome(rng: random.Random) -> Spec:
    name = _pick(rng, "is_palindrome", "reads_same_backwards", "palindrome")
    inputs = [(w,) for w in rng.sample(PALINDROMES, 6)] + [(w,) for w in rng.sample(WORDS, 6)]
    return Spec(name, "s", "returns True if the string s reads the same backwards, else False",
                f"def {name}(s):\n    return s == s[::-1]\n", inputs, pairs=True)


def scale_each(rng: random.Random) -> Spec:
    k = rng.randint(2, 5)
    name = _pick(rng, f"times_{k}", "scale_each", "multiply_all")
    return Spec(name, "nums", f"returns a new list with each number of nums multiplied by {k}",
                f"def {name}(nums):\n    return [x * {k} for x in nums]\n", [(_nums(rng, -5, 12),) for _ in range(10)])


def count_char(rng: random.Random) -> Spec:
    c = rng.choice("aeinorst")
    name = _pick(rng, f"count_{c}", "count_char", "how_many")
    inputs = [(_words(rng, 1, 3),) for _ in range(12)]
    return Spec(name, "s", f"returns how many times the letter '{c}' appears in the string s",
                f"def {name}(s):\n    return s.count('{c}')\n", inputs)


def end_element(rng: random.Random) -> Spec:
    first = rng.random() < 0.5
    name = _pick(rng, "first", "head", "first_item") if first else _pick(rng, "last", "tail_item", "last_item")
    return Spec(name, "items", f"returns the {'first' if first else 'last'} item of the non-empty list items",
                f"def {name}(items):\n    return items[{0 if first else -1}]\n",
                [(_nums(rng, -9, 50),) for _ in range(10)])


def repeat_string(rng: random.Random) -> Spec:
    n = rng.randint(2, 4)
    name = _pick(rng, f"repeat_{n}", "repeat", "echo")
    return Spec(name, "s", f"returns the string s repeated {n} times, with nothing in between",
                f"def {name}(s):\n    return s * {n}\n", [(rng.choice(WORDS[:30]),) for _ in range(10)])


def keep_parity(rng: random.Random) -> Spec:
    even = rng.random() < 0.5
    kind, rest = ("even", 0) if even else ("odd", 1)
    name = _pick(rng, f"keep_{kind}", f"only_{kind}", f"{kind}_numbers")
    return Spec(name, "nums", f"returns a list of the {kind} numbers in nums, in their order",
                f"def {name}(nums):\n    return [x for x in nums if x % 2 == {rest}]\n",
                [(_nums(rng, 0, 30, (4, 7)),) for _ in range(12)])


def is_multiple(rng: random.Random) -> Spec:
    k = rng.randint(3, 9)
    name = _pick(rng, f"divisible_by_{k}", "is_multiple", "divides")
    inputs = [(k * rng.randint(1, 12),) for _ in range(6)] + [(k * rng.randint(1, 12) + rng.randint(1, k - 1),)
                                                                for _ in range(6)]
    return Spec(name, "n", f"returns True if n is divisible by {k}, else False",
                f"def {name}(n):\n    return n % {k} == 0\n", inputs, pairs=True)


UNITS = (("hours", "minutes", 60), ("minutes", "seconds", 60), ("days", "hours", 24), ("weeks", "days", 7),
         ("feet", "inches", 12), ("meters", "centimeters", 100), ("kilograms", "grams", 1000))


def convert_units(rng: random.Random) -> Spec:
    big, small, k = rng.choice(UNITS)
    name = _pick(rng, f"{big}_to_{small}", "convert")
    return Spec(name, big[0], f"converts {big[0]} {big} to {small} and returns the number of {small}",
                f"def {name}({big[0]}):\n    return {big[0]} * {k}\n", [(rng.randint(2, 40),) for _ in range(10)])


def sum_to_n(rng: random.Random) -> Spec:
    start = rng.randint(0, 3)
    name = _pick(rng, "sum_to_n", "sum_up_to", "triangle")
    return Spec(name, "n", f"returns the sum of all whole numbers from {start} to n, both included",
                f"def {name}(n):\n    return sum(range({start}, n + 1))\n", [(rng.randint(4, 30),) for _ in range(10)])


def factorial(rng: random.Random) -> Spec:
    name = _pick(rng, "factorial", "fact", "product_to_n")
    return Spec(name, "n", "returns n factorial, the product 1 * 2 * ... * n",
                f"def {name}(n):\n    result = 1\n    for i in range(2, n + 1):\n        result *= i\n    return result\n",
                [(n,) for n in rng.sample(range(2, 11), 8)])


def list_extreme(rng: random.Random) -> Spec:
    big = rng.random() < 0.5
    name = _pick(rng, "largest", "list_max", "biggest") if big else _pick(rng, "smallest", "list_min", "lowest")
    return Spec(name, "nums", f"returns the {'largest' if big else 'smallest'} number in the non-empty list nums",
                f"def {name}(nums):\n    return {'max' if big else 'min'}(nums)\n",
                [(_nums(rng, -20, 40, (3, 6)),) for _ in range(12)])


def add_suffix(rng: random.Random) -> Spec:
    suffix = rng.choice(("ing", "!", "_v2", "ed", "s", "?", "-x", "er"))
    name = _pick(rng, "add_suffix", "append_end", "with_suffix")
    return Spec(name, "s", f"returns the string s followed by '{suffix}'", f"def {name}(s):\n    return s + '{suffix}'\n",
                [(rng.choice(WORDS),) for _ in range(10)])


def greet(rng: random.Random) -> Spec:
    word = rng.choice(("Hello", "Hi", "Welcome", "Hey", "Goodbye"))
    name = _pick(rng, "greet", "greeting", "say_hi")
    return Spec(name, "name", f"returns the string '{word}, ' followed by name and '!', e.g. '{word}, Ana!' for 'Ana'",
                f"def {name}(name):\n    return '{word}, ' + name + '!'\n",
                [(w.capitalize(),) for w in rng.sample(WORDS, 10)])


def sign(rng: random.Random) -> Spec:
    name = _pick(rng, "sign", "sign_of", "signum")
    inputs = [(rng.randint(1, 90),) for _ in range(5)] + [(-rng.randint(1, 90),) for _ in range(5)] + [(0,), (0,)]
    return Spec(name, "x", "returns 1 if the number x is positive, -1 if it is negative and 0 if it is zero",
                f"def {name}(x):\n    if x > 0:\n        return 1\n    if x < 0:\n        return -1\n    return 0\n",
                inputs, pairs=True)


def count_digits(rng: random.Random) -> Spec:
    name = _pick(rng, "count_digits", "num_digits", "digit_count")
    return Spec(name, "n", "returns how many digits the positive whole number n has",
                f"def {name}(n):\n    return len(str(n))\n", [(rng.randint(10 ** (d - 1), 10 ** d - 1),)
                                                           for d in (1, 2, 3, 4, 5, 6, 7) for _ in range(2)])


def join_words(rng: random.Random) -> Spec:
    sep = rng.choice(("-", ", ", " + ", "_", "/", " and "))
    name = _pick(rng, "join_words", "link", "combine")
    return Spec(name, "words", f"returns the strings of the list words joined with '{sep}' between them",
                f"def {name}(words):\n    return '{sep}'.join(words)\n",
                [(rng.sample(WORDS, rng.randint(2, 4)),) for _ in range(10)])


def count_parity(rng: random.Random) -> Spec:
    kind, rest = rng.choice((("even", 0), ("odd", 1)))
    name = _pick(rng, f"count_{kind}", f"num_{kind}", f"{kind}_count")
    return Spec(name, "nums", f"returns how many {kind} numbers the list nums contains",
                f"def {name}(nums):\n    return sum(1 for x in nums if x % 2 == {rest})\n",
                [(_nums(rng, 0, 30, (4, 8)),) for _ in range(12)])


def reverse_string(rng: random.Random) -> Spec:
    name = _pick(rng, "reverse", "reverse_string", "backwards")
    return Spec(name, "s", "returns the string s reversed", f"def {name}(s):\n    return s[::-1]\n",
                [(rng.choice(WORDS) + rng.choice(("", " " + rng.choice(WORDS))),) for _ in range(10)])


def remove_duplicates(rng: random.Random) -> Spec:
    name = _pick(rng, "remove_duplicates", "unique", "dedupe")
    ref = (f"def {name}(nums):\n    out = []\n    for x in nums:\n        if x not in out:\n            out.append(x)\n"
           "    return out\n")
    return Spec(name, "nums", "returns nums without repeated numbers, keeping the first time each appears", ref,
                [(_nums(rng, 1, 6, (5, 8)),) for _ in range(10)])


def longest_word(rng: random.Random) -> Spec:
    name = _pick(rng, "longest_word", "longest", "biggest_word")
    ref = f"def {name}(s):\n    return max(s.split(), key=len)\n"
    inputs = []
    while len(inputs) < 10:
        words = rng.sample(WORDS, rng.randint(2, 4))
        lengths = sorted(len(w) for w in words)
        if lengths[-1] > lengths[-2]:  # one longest word, so "the first of equals" never matters
            inputs.append((" ".join(words),))
    return Spec(name, "s", "returns the longest word (the word, not its length) in the string s of words separated by spaces", ref, inputs)


def power(rng: random.Random) -> Spec:
    p = rng.choice((2, 3))
    word = {2: "square", 3: "cube"}[p]
    name = _pick(rng, word, f"{word}_of", f"to_power_{p}")
    return Spec(name, "x", f"returns the {word} of the number x (x to the power {p})",
                f"def {name}(x):\n    return x ** {p}\n", [(rng.randint(-12, 15),) for _ in range(10)])


# Held-out families: never in the training file


def sum_digits(rng: random.Random) -> Spec:
    name = _pick(rng, "sum_digits", "digit_sum", "add_digits")
    return Spec(name, "n", "returns the sum of the digits of the positive whole number n",
                f"def {name}(n):\n    return sum(int(d) for d in str(n))\n",
                [(rng.randint(10, 99999),) for _ in range(10)])


def count_words(rng: random.Random) -> Spec:
    name = _pick(rng, "count_words", "word_count", "num_words")
    return Spec(name, "s", "returns how many words the string s has (words are separated by spaces)",
                f"def {name}(s):\n    return len(s.split())\n", [(_words(rng, 2, 7),) for _ in range(12)])


def product_list(rng: random.Random) -> Spec:
    name = _pick(rng, "product", "multiply_list", "list_product")
    ref = f"def {name}(nums):\n    result = 1\n    for x in nums:\n        result *= x\n    return result\n"
    return Spec(name, "nums", "returns the product of the numbers in the list nums", ref,
                [(_nums(rng, 1, 9, (2, 4)),) for _ in range(10)])


def remove_char(rng: random.Random) -> Spec:
    c = rng.choice("aeiorst")
    name = _pick(rng, f"remove_{c}", "strip_char", "drop_letter")
    return Spec(name, "s", f"returns the string s with every '{c}' removed",
                f"def {name}(s):\n    return s.replace('{c}', '')\n", [(_words(rng, 1, 3),) for _ in range(12)])


def starts_with(rng: random.Random) -> Spec:
    prefix = rng.choice(("s", "b", "t", "c", "r", "m"))
    name = _pick(rng, f"starts_with_{prefix}", "begins_with", "has_prefix")
    inputs = [(w,) for w in WORDS if w.startswith(prefix)] + [(w,) for w in rng.sample(WORDS, 8)]
    return Spec(name, "s", f"returns True if the string s starts with '{prefix}', else False",
                f"def {name}(s):\n    return s.startswith('{prefix}')\n", inputs, pairs=True)


def count_above(rng: random.Random) -> Spec:
    t = rng.randint(0, 20)
    name = _pick(rng, f"count_above_{t}", "count_greater", "how_many_above")
    return Spec(name, "nums", f"returns how many numbers in the list nums are greater than {t}",
                f"def {name}(nums):\n    return sum(1 for x in nums if x > {t})\n",
                [(_nums(rng, -5, 40, (4, 7)),) for _ in range(12)])


Family = Callable[[random.Random], Spec]
TRAIN_FAMILIES: dict[str, Family] = {f.__name__: f for f in (
    add_const, max_of_two, abs_diff, sum_list, count_vowels, reverse_words, clamp, fizzbuzz, running_max,
    is_palindrome, scale_each, count_char, end_element, repeat_string, keep_parity, is_multiple, convert_units,
    sum_to_n, factorial, list_extreme, add_suffix, greet, sign, count_digits, join_words, count_parity,
    reverse_string, remove_duplicates, longest_word, power,
)}
HELDOUT_FAMILIES: dict[str, Family] = {f.__name__: f for f in (
    sum_digits, count_words, product_list, remove_char, starts_with, count_above,
)}
