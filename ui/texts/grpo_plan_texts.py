"""The texts of ui/views/grpo_plan.py, English and Chinese (the rule: ui/texts/__init__.py)."""

from __future__ import annotations

from ui.texts import both as _

TEXT: dict[str, dict[str, str]] = {
    "train.grpo.derived": _("**{prompts}** prompts x **{generations}** completions each → **{effective_batch}** "
                            "completions an optimizer step (**{prompts_per_step}** prompts), **{steps_per_epoch}** "
                            "steps per epoch, **{total_steps}** steps in all (**{epochs}** epochs), **{warmup_steps}** "
                            "warmup steps.",
                            "**{prompts}** 个提示 x 每个 **{generations}** 条回答 → 每个优化步 **{effective_batch}** "
                            "条回答（**{prompts_per_step}** 个提示），每轮 **{steps_per_epoch}** 步，共 **{total_steps}** 步"
                            "（**{epochs}** 轮），预热 **{warmup_steps}** 步。"),
    "train.grpo.sampling": _("Each completion is sampled by the model itself, up to **{tokens}** tokens at temperature "
                             "**{temperature}**.", "每条回答由模型自己采样，至多 **{tokens}** 个 token，温度 **{temperature}**。"),
    "train.grpo.kl": _("beta **{beta}**: a reference pass each step gives the KL term (the Runs tab charts it).",
                       "beta **{beta}**：每步一次参考模型前向，得到 KL 项（“运行”页会画出它）。"),
    "train.grpo.no_kl": _("beta 0: no KL term and no reference pass.", "beta 0：没有 KL 项，也没有参考模型前向。"),
    "train.grpo.unmeasured": _("The prompts are measured with the model's tokenizer once the model is on disk; until "
                               "then these are all the rows, and the worker checks their length when it starts.",
                               "模型就绪后会用其分词器测量提示长度；在此之前这里按全部行计算，训练进程启动时会检查长度。"),
    "train.grpo.functions_ok": _("✅ Your reward functions import and score a sample completion: {names}.",
                                 "✅ 自定义奖励函数可以导入，并能为样例回答打分：{names}。"),
}
