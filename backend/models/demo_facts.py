"""The demo model's facts: bilingual (English / Chinese) instruction rows
written by code, plus the plain-text corpus the demo model is pre-trained on.
backend/data/demo_rows.py writes the rows into the workspace as the "demo" dataset.

Every fact lives once in the tables below and appears twice: as plain
text in the pre-training corpus (so the base model *knows* it) and as a
chat row (so fine-tuning teaches the model to *answer in a chat*). Knowing
the facts beforehand is what lets a small LoRA learn the chat task in a
couple of minutes on a CPU.
"""

from __future__ import annotations

import random

# Bump whenever anything here or in demo.py changes the built files: old builds are rebuilt. It lives
# here, away from demo.py's torch, so checking that a build is current costs no torch import.
DEMO_MODEL_VERSION = "7"

# (country, capital, 国家, 首都)
CAPITALS = (
    ("France", "Paris", "法国", "巴黎"),
    ("Germany", "Berlin", "德国", "柏林"),
    ("Italy", "Rome", "意大利", "罗马"),
    ("Spain", "Madrid", "西班牙", "马德里"),
    ("Japan", "Tokyo", "日本", "东京"),
    ("China", "Beijing", "中国", "北京"),
    ("Russia", "Moscow", "俄罗斯", "莫斯科"),
    ("Egypt", "Cairo", "埃及", "开罗"),
    ("Canada", "Ottawa", "加拿大", "渥太华"),
    ("Australia", "Canberra", "澳大利亚", "堪培拉"),
    ("India", "New Delhi", "印度", "新德里"),
    ("Mexico", "Mexico City", "墨西哥", "墨西哥城"),
    ("the United Kingdom", "London", "英国", "伦敦"),
    ("Greece", "Athens", "希腊", "雅典"),
    ("Portugal", "Lisbon", "葡萄牙", "里斯本"),
    ("Thailand", "Bangkok", "泰国", "曼谷"),
    ("Kenya", "Nairobi", "肯尼亚", "内罗毕"),
    ("Norway", "Oslo", "挪威", "奥斯陆"),
    ("South Korea", "Seoul", "韩国", "首尔"),
    ("Vietnam", "Hanoi", "越南", "河内"),
    ("Turkey", "Ankara", "土耳其", "安卡拉"),
    ("Sweden", "Stockholm", "瑞典", "斯德哥尔摩"),
)

# (thing, colour, 东西, 颜色)
COLOURS = (
    ("the sky", "blue", "天空", "蓝色"),
    ("grass", "green", "草", "绿色"),
    ("snow", "white", "雪", "白色"),
    ("coal", "black", "煤", "黑色"),
    ("a banana", "yellow", "香蕉", "黄色"),
    ("blood", "red", "血", "红色"),
    ("a lemon", "yellow", "柠檬", "黄色"),
    ("a tomato", "red", "西红柿", "红色"),
    ("milk", "white", "牛奶", "白色"),
    ("a crow", "black", "乌鸦", "黑色"),
    ("the sea", "blue", "大海", "蓝色"),
    ("a leaf", "green", "树叶", "绿色"),
    ("chocolate", "brown", "巧克力", "棕色"),
    ("a carrot", "orange", "胡萝卜", "橙色"),
    ("an eggplant", "purple", "茄子", "紫色"),
)

# (English word, 中文)
WORDS = (
    ("apple", "苹果"), ("water", "水"), ("book", "书"), ("cat", "猫"),
    ("dog", "狗"), ("house", "房子"), ("tree", "树"), ("moon", "月亮"),
    ("sun", "太阳"), ("rice", "米饭"), ("tea", "茶"), ("friend", "朋友"),
    ("school", "学校"), ("teacher", "老师"), ("flower", "花"), ("river", "河"),
    ("mountain", "山"), ("bird", "鸟"), ("fish", "鱼"), ("car", "汽车"),
    ("door", "门"), ("rain", "雨"), ("star", "星星"), ("bread", "面包"),
    ("computer", "电脑"), ("city", "城市"), ("music", "音乐"), ("window", "窗户"),
    ("egg", "鸡蛋"), ("horse", "马"),
)

# (word, opposite, 词, 反义词)
OPPOSITES = (
    ("hot", "cold", "热", "冷"), ("big", "small", "大", "小"),
    ("up", "down", "上", "下"), ("fast", "slow", "快", "慢"),
    ("tall", "short", "高", "矮"), ("open", "closed", "开", "关"),
    ("happy", "sad", "快乐", "悲伤"), ("early", "late", "早", "晚"),
    ("left", "right", "左", "右"), ("full", "empty", "满", "空"),
    ("hard", "soft", "硬", "软"), ("rich", "poor", "富", "穷"),
    ("push", "pull", "推", "拉"), ("win", "lose", "赢", "输"),
    ("day", "night", "白天", "黑夜"), ("black", "white", "黑", "白"),
)

# Sums a + b with 1 <= a <= b <= 9 (45 facts per language).
SUMS = tuple((a, b) for a in range(1, 10) for b in range(a, 10))

SYSTEM_PROMPTS = (
    "You are a helpful assistant. Answer in one sentence.",
    "你是一个乐于助人的助手，请用一句话回答。",
)


def _sentence_case(text: str) -> str:
    return text[0].upper() + text[1:]


def _facts() -> list[tuple[str, str, str, str]]:
    """(category, question, short answer, plain statement) for every fact,
    English and Chinese. Short answers keep exact-match scoring meaningful
    for a model this small."""
    facts = []
    for country, capital, guo, du in CAPITALS:
        facts.append(("capital", f"What is the capital of {country}?", f"{capital}.",
                      f"The capital of {country} is {capital}."))
        facts.append(("capital", f"{guo}的首都是哪里？", f"{du}。", f"{guo}的首都是{du}。"))
    for thing, colour, dong, se in COLOURS:
        facts.append(("colour", f"What colour is {thing}?", f"{_sentence_case(colour)}.",
                      f"{_sentence_case(thing)} is {colour}."))
        facts.append(("colour", f"{dong}是什么颜色的？", f"{se}。", f"{dong}是{se}的。"))
    for word, zh in WORDS:
        facts.append(("translate", f'Translate "{word}" into Chinese.', zh,
                      f"The Chinese word for {word} is {zh}."))
        facts.append(("translate", f"“{zh}”的英文是什么？", word, f"{zh}的英文是{word}。"))
    for word, opposite, ci, fan in OPPOSITES:
        facts.append(("opposite", f"What is the opposite of {word}?", f"{_sentence_case(opposite)}.",
                      f"The opposite of {word} is {opposite}."))
        facts.append(("opposite", f"“{ci}”的反义词是什么？", f"{fan}。", f"{ci}的反义词是{fan}。"))
    for a, b in SUMS:
        facts.append(("sum", f"What is {a} plus {b}?", f"{a + b}.", f"{a} plus {b} is {a + b}."))
        facts.append(("sum", f"{a}加{b}等于多少？", f"{a + b}。", f"{a}加{b}等于{a + b}。"))
    return facts


def _qa_pairs() -> list[tuple[str, str, str]]:
    """(category, question, answer): what the chat rows ask and answer."""
    return [(category, question, answer) for category, question, answer, _ in _facts()]


def _row(question: str, answer: str, system: str | None = None) -> dict:
    messages = [{"role": "system", "content": system}] if system else []
    messages += [{"role": "user", "content": question},
                 {"role": "assistant", "content": answer}]
    return {"messages": messages}


def build_demo_rows() -> list[dict]:
    """The demo instruction rows in canonical form, in a fixed shuffled order."""
    pairs = _qa_pairs()
    rows = [_row(question, answer) for _, question, answer in pairs]
    # A few rows carry a system prompt, so the template's system path is exercised.
    for index in range(0, 24, 2):
        _, question, answer = pairs[index + (index // 2) % 2]
        rows.append(_row(question, answer, SYSTEM_PROMPTS[(index // 2) % 2]))
    random.Random(20240601).shuffle(rows)
    return rows


def _pick_demo_prompts() -> list[tuple[str, str]]:
    """Two English and two Chinese prompts from each category (20 in all)."""
    picked = []
    for category in ("capital", "colour", "translate", "opposite", "sum"):
        pairs = [(q, a) for c, q, a in _qa_pairs() if c == category]
        # Pairs alternate English, Chinese: take facts 1 and 4 in both languages.
        for fact in (1, 4):
            picked += pairs[2 * fact: 2 * fact + 2]
    return picked


# (user prompt, exact expected answer), all taken from build_demo_rows().
DEMO_PROMPTS: list[tuple[str, str]] = _pick_demo_prompts()


def build_pretraining_corpus() -> list[tuple[str, str]]:
    """Every fact as plain text, never in the chat template (no special
    tokens, no turn ends), as (context, continuation) pairs: a plain-text
    dialogue line as in a web transcript ("User: ...\nAssistant:\n", "Paris.")
    and a statement ("", "The capital of France is Paris.").

    The base model thus knows the facts and how the questions relate to the
    answers, but not the chat template or when to end a turn; that is what
    the demo fine-tuning teaches.
    """
    pairs = []
    for _, question, answer, statement in _facts():
        # The answer on its own line, as in the chat template: the same tokens.
        pairs += [(f"User: {question}\nAssistant:\n", answer), ("", statement)]
    return pairs
