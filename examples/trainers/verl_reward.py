"""verl custom reward function backed by `agentworld reward serve`.

verl config (volcengine/verl b178a3c, 2026-01-29, verl/trainer/config/ppo_trainer.yaml;
newer verl nests the same keys under reward.):
    custom_reward_function.path=examples/trainers/verl_reward.py
    custom_reward_function.name=compute_score
verl loads this file by path (verl/utils/import_utils.py, load_extern_object), so the folder
is put on sys.path below for its own import of agentworld_reward.
Data: the Parquet of `agentworld data export --mode rl`: data_source "agentworld/<domain>",
reward_model.ground_truth the real observation, extra_info.messages the prompt's turns (the
history and the current action, which verl does not hand a reward function otherwise).
verl's naive reward manager calls compute_score(data_source=, solution_str=, ground_truth=,
extra_info=) once per response; a dict result's "score" is the reward, the other keys are
logged as reward_extra_info.

Warm-up mixes (`data export --mode rl --mix-rows YOURS.jsonl`): rows whose data_source does
not start with "agentworld/" are your agent's own and go to your reward function, named by
AGENTWORLD_OTHER_REWARD=/path/to/file.py:function (default: verl's default_compute_score).
"""
import importlib.util
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from agentworld_reward import item, prompt_of, score_items  # noqa: E402

WORLD_MODEL = "agentworld/"
_other = None


def other_reward():
    """The reward function of the rows that are not world-model rows."""
    global _other
    if _other is None:
        spec = os.environ.get("AGENTWORLD_OTHER_REWARD", "")
        if spec:
            path, _, name = spec.rpartition(":")
            mod_spec = importlib.util.spec_from_file_location("agentworld_other_reward", path)
            mod = importlib.util.module_from_spec(mod_spec)
            mod_spec.loader.exec_module(mod)
            _other = getattr(mod, name)
        else:
            from verl.utils.reward_score import default_compute_score
            _other = default_compute_score
    return _other


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    if not str(data_source).startswith(WORLD_MODEL):
        return other_reward()(data_source=data_source, solution_str=solution_str, ground_truth=ground_truth,
                              extra_info=extra_info, **kwargs)
    info = extra_info or {}
    [r] = score_items([item(data_source, solution_str, ground_truth, prompt_of(None, info), info.get("id", ""))])
    c = r["components"]
    return {"score": r["score"] if r["score"] is not None else 0.0,
            "rubric": c["rubric"], "rule": c["rule"], "dropped": bool(r.get("dropped"))}
