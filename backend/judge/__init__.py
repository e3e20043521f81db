"""A judge model: an OpenAI-compatible chat endpoint that compares two checkpoints'
answers (pairwise, both orders) or grades one checkpoint's answers on a 1-5
rubric, cached on disk, written under RUN/eval/judge/, and calibrated on the
user's blind votes from the Chat tab.

    client.py       the endpoint, through the `openai` package; refusals as sentences
    templates.py    the editable prompt templates and the default rubrics per task kind
    verdicts.py     reading a verdict ("Verdict: A", "Grade: 4") out of the judge's answer
    cache.py        answers kept by (endpoint, prompt, answers): a rerun makes no call
    asking.py       one judged call: cache, one retry on an unreadable answer, the record kept
    estimates.py    Wilson interval, Cohen's kappa, mean and spread
    sources.py      the answers to judge: the learning report, eval predictions, a file, the votes
    head_to_head.py A against B, both orders, win rate with its interval
    graded.py       a grade per answer, mean and spread per checkpoint
    calibration.py  agreement with the user's votes, and choosing the better template
    evalset.py      an eval set written by the judge from a one-line description
    judgement_file.py RUN/eval/judge/<name>.json
    runner.py       one judgement: prepare_judgement (every refusal before a call), plan (the calls to make), run_judgement
    background.py   a judgement as a background job (the Evaluate tab), its key in the environment
    cli.py          `python -m backend.evaluate --run R --judge URL --judge-model NAME ...`
"""
