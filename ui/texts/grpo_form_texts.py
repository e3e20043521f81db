"""The texts of ui/grpo_form.py, English and Chinese (the rule: ui/texts/__init__.py): each reward kind's
label and help, its settings' and the own functions' box; ui/grpo_form.py keys them by widget."""

from __future__ import annotations

from ui.texts import both as _

KIND_LABELS = {"exact_match": _("Exact match with the reference answer", "与参考答案完全一致"),
               "format": _("Format (regular expression)", "格式（正则表达式）"),
               "length": _("Length in a target range", "长度在目标范围内"),
               "contains": _("Contains a text", "包含某段文字"),
               "not_contains": _("Does not contain a text", "不包含某段文字"),
               "rouge_l": _("ROUGE-L overlap with the reference answer", "与参考答案的 ROUGE-L 重合度")}
KIND_HELP = {"exact_match": _("1 when the answer (inside <answer>…</answer>, else the last number, else the whole "
                              "completion) equals the data's reference answer; numbers and spaces normalised.",
                              "答案（<answer>…</answer> 内的文字，否则最后一个数字，否则整段回答）与数据的参考答案相同时为 1；"
                              "数字和空白已规范化。"),
             "format": _("1 when the whole completion matches the pattern.", "整段回答匹配该模式时为 1。"),
             "length": _("1 inside the range, falling to 0 at twice the distance of its bound.",
                         "在范围内为 1，偏离到边界的两倍时降到 0。"),
             "contains": _("1 when the completion contains the text.", "回答包含该文字时为 1。"),
             "not_contains": _("1 when the completion does not contain the text.", "回答不包含该文字时为 1。"),
             "rouge_l": _("Partial credit: the ROUGE-L F-measure (0-1) of the completion against the data's reference "
                          "answer, Chinese characters counted one by one.",
                          "部分得分：回答与数据参考答案的 ROUGE-L F 值（0-1），中文按单字计。")}
WEIGHT = (_("weight", "权重"), _("Its share in the weighted sum TRL trains on.", "它在 TRL 训练所用加权和中的比重。"))
PARAM_TEXT = {"format_pattern": (_("Pattern", "模式"), _("Python regex; empty: <think>…</think><answer>…</answer>.",
                                                         "Python 正则；留空：<think>…</think><answer>…</answer>。")),
              "length_min": (_("At least (tokens)", "至少（token）"), _("Empty: no lower bound.", "留空：无下限。")),
              "length_max": (_("At most (tokens)", "至多（token）"), _("Empty: no upper bound.", "留空：无上限。")),
              "contains_text": (_("Text", "文字"), _("Looked for as written (case counts).", "按原样查找（区分大小写）。")),
              "not_contains_text": (_("Text", "文字"), _("Looked for as written (case counts).",
                                                         "按原样查找（区分大小写）。"))}
FUNCTIONS = (_("Your own reward functions", "自定义奖励函数"),
             _("One 'module:function' a line, optionally a weight after it (e.g. my_rewards:polite 0.5); TRL's "
               "signature f(prompts, completions, **kwargs) -> list[float], the reference answers as answer=…. "
               "Each is imported and called once on a sample before the run starts.",
               "每行一个 'module:function'，后面可跟权重（例如 my_rewards:polite 0.5）；TRL 的签名 "
               "f(prompts, completions, **kwargs) -> list[float]，参考答案以 answer=… 传入。"
               "运行开始前会逐个导入并在一个样例上调用一次。"))
TEXT: dict[str, dict[str, str]] = {
    "train.section.grpo": _("GRPO: rewards and sampling", "GRPO：奖励与采样"),
    "train.grpo.rewards": _("**Rewards**: tick the ones that score a completion and weight them.",
                            "**奖励**：勾选用来给回答打分的奖励，并设置权重。"),
    "train.grpo.kept": _("The loaded file has {count} more preset(s) of a kind shown here: kept as they are while "
                         "that kind stays ticked (edit them in the YAML).",
                         "加载的文件中还有 {count} 个同类预设：只要该类保持勾选就原样保留（请在 YAML 中修改）。"),
}
