"""The data of docs/DEMO.md's learning table, nobody here tuned for: written as workspace dataset
folders (data.jsonl + eval.jsonl + meta.json, backend/data/saved_datasets.py), so each run trains
on the training rows and its learning report scores the eval rows it never saw.

* company-faq: a small company's FAQ of the project's own, 12 facts; each fact asked 4 ways for
  training (48 rows) and 2 new ways held out (24 rows): scored on new phrasings of known facts;
* json-format: sentences about a person, answered as a JSON object with the keys name, age and
  city (72 training rows, 24 held out);
* alpaca-zh: Chinese rows of ../shared/data/alpaca_zh_demo.json with short answers (176 + 24);
* alpaca-en: English rows of ../shared/data/alpaca_en_demo.json with answers under 300
  characters (176 + 24: the 200 rows of the gemma row).

    .venv/bin/python bench/learning_sets.py OUT_DIR   # writes OUT_DIR/<name>/ for each set

The shared data are read where they lie (../shared/data), never copied into the checkout.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
HELD_OUT = 24

# (answer, four training phrasings, two held-out phrasings)
FAQ = [
    ("Lumen Bike Works was founded in 2009.",
     ["When was Lumen Bike Works founded?", "What year did Lumen Bike Works start?",
      "How long ago was Lumen Bike Works established? Give the year.", "In which year was the company founded?"],
     ["Since what year has Lumen Bike Works existed?", "When did Lumen Bike Works open for business?"]),
    ("Lumen Bike Works was founded by Ines Calder.",
     ["Who founded Lumen Bike Works?", "Who is the founder of Lumen Bike Works?",
      "Who started the company?", "Which person set up Lumen Bike Works?"],
     ["Whose idea was Lumen Bike Works?", "Tell me the name of the person who founded Lumen Bike Works."]),
    ("Lumen Bike Works has 7 shops.",
     ["How many shops does Lumen Bike Works have?", "How many stores do you run?",
      "What is the number of Lumen Bike Works shops?", "How many locations does the company have?"],
     ["How many bike shops are there in total?", "Count of Lumen Bike Works stores?"]),
    ("Our headquarters is in Tallinn.",
     ["Where is the headquarters of Lumen Bike Works?", "In which city is your head office?",
      "Where is Lumen Bike Works based?", "What city is the company's main office in?"],
     ["Where are you headquartered?", "Which city hosts the Lumen Bike Works head office?"]),
    ("Our shops open at 9:30 and close at 18:00.",
     ["What are your opening hours?", "When do the shops open and close?",
      "What time does Lumen Bike Works open?", "Until when are your stores open?"],
     ["At what hours can I visit a shop?", "What are the business hours of your stores?"]),
    ("Every frame comes with a 5-year warranty.",
     ["How long is the warranty on a frame?", "What warranty do your bikes have?",
      "Is there a warranty on Lumen frames?", "How many years of warranty do I get?"],
     ["For how long is my bike frame covered?", "What is the frame warranty period?"]),
    ("The first service within 60 days is free.",
     ["Is the first service free?", "Do I pay for the first bike service?",
      "What is your free service policy?", "When is servicing free of charge?"],
     ["Do you service new bikes for free?", "How long do I have to get a free first service?"]),
    ("You can return a bike within 30 days with the receipt.",
     ["What is your return policy?", "Can I return a bike?",
      "How many days do I have to return a bike?", "How do returns work at Lumen Bike Works?"],
     ["Until when can I bring a bike back?", "What is the return window for bikes?"]),
    ("Lumen Bike Works employs 85 people.",
     ["How many people work at Lumen Bike Works?", "How many employees does the company have?",
      "What is the size of your staff?", "How big is the Lumen Bike Works team?"],
     ["How many staff members are there?", "Number of employees at Lumen Bike Works?"]),
    ("Our best-selling model is the Kestrel 3.",
     ["What is your best-selling bike?", "Which model sells the most?",
      "What is the most popular Lumen bike?", "Which bike do customers buy most often?"],
     ["What is your top seller?", "Name the model that sells best at Lumen Bike Works."]),
    ("Delivery within Estonia costs 15 euros.",
     ["How much does delivery cost?", "What is the delivery fee?",
      "Do you deliver bikes, and for how much?", "What does shipping within Estonia cost?"],
     ["How much do I pay to have a bike delivered?", "What is the price of delivery in Estonia?"]),
    ("Renting a city bike costs 12 euros a day.",
     ["How much is a bike rental?", "What does it cost to rent a city bike?",
      "What is the daily rental price?", "Can I rent a bike, and at what price?"],
     ["How much for one day with a rented city bike?", "What is the rental fee per day?"]),
]

NAMES = ["Maria", "Jonas", "Aiko", "Tomas", "Leila", "Pavel", "Sofia", "Omar", "Elin", "Ravi", "Greta", "Diego",
         "Hana", "Felix", "Nadia", "Viktor", "Amara", "Lukas", "Mei", "Stefan", "Yara", "Oskar", "Ines", "Karim"]
CITIES = ["Porto", "Oslo", "Kyoto", "Lyon", "Cairo", "Riga", "Lima", "Dublin", "Accra", "Bergen", "Quito", "Turin"]
SENTENCES = ["{name} is {age} years old and lives in {city}.", "{name}, {age}, lives in {city}.",
             "Living in {city}, {name} turned {age} this year.", "{city} is home to {name}, who is {age}.",
             "At {age}, {name} moved to {city}.", "{name} ({age}) works in {city}."]
JSON_ASK = ["Extract the name, age and city as a JSON object: {sentence}",
            "Return JSON with keys name, age, city for this sentence: {sentence}",
            "As a JSON object with name, age and city: {sentence}"]


def chat(question: str, answer: str) -> dict:
    return {"messages": [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]}


def faq() -> tuple[list[dict], list[dict]]:
    train = [chat(q, answer) for answer, asked, _ in FAQ for q in asked]
    held = [chat(q, answer) for answer, _, new in FAQ for q in new]
    return train, held


def json_format() -> tuple[list[dict], list[dict]]:
    rng = random.Random(7)
    rows = []
    for i in range(72 + HELD_OUT):
        name, city, age = rng.choice(NAMES), rng.choice(CITIES), rng.randint(19, 78)
        sentence = SENTENCES[i % len(SENTENCES)].format(name=name, age=age, city=city)
        answer = json.dumps({"name": name, "age": age, "city": city})
        rows.append(chat(JSON_ASK[i % len(JSON_ASK)].format(sentence=sentence), answer))
    return rows[:-HELD_OUT], rows[-HELD_OUT:]


def alpaca(file: str, longest: int, count: int) -> tuple[list[dict], list[dict]]:
    rows = json.loads((SHARED_DATA / file).read_text(encoding="utf-8"))
    chosen = [r for r in rows if len(r["output"]) < longest and len(r["instruction"]) + len(r["input"]) < 300]
    chosen = chosen[:count]
    if len(chosen) < count:
        raise SystemExit(f"{file}: only {len(chosen)} rows with answers under {longest} characters, not {count}")
    out = [chat(f"{r['instruction']}\n{r['input']}".strip(), r["output"]) for r in chosen]
    return out[:-HELD_OUT], out[-HELD_OUT:]


SETS = {
    "company-faq": faq,
    "json-format": json_format,
    "alpaca-zh": lambda: alpaca("alpaca_zh_demo.json", 120, 200),
    "alpaca-en": lambda: alpaca("alpaca_en_demo.json", 300, 200),
}


def write_set(folder: Path, train: list[dict], held: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in (("data.jsonl", train), ("eval.jsonl", held)):
        (folder / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    meta = {"name": folder.name, "source": {"path": "bench/learning_sets.py"}, "fixes": [],
            "rows_before": len(train) + len(held), "rows_after": len(train) + len(held),
            "split": {"train_rows": len(train), "eval_rows": len(held), "train_file": "data.jsonl",
                      "eval_file": "eval.jsonl"}}
    (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return folder


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    out = Path(sys.argv[1])
    for name, build in SETS.items():
        train, held = build()
        print(f"{write_set(out / name, train, held)}: {len(train)} training rows, {len(held)} held out")


if __name__ == "__main__":
    main()
