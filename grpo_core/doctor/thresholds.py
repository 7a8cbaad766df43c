"""The run doctor's thresholds, each with why it has its value (read by every check in :mod:`grpo_core.doctor`)."""

ZERO_STD_FRACTION = 0.5
ZERO_STD_MIN_STEPS = 3
#: Flat groups are a warning only from this many logged steps in a row: the quick start samples 2 prompts per step and,
#: while it starts (most completions cut, all 0) and once it solves sums (all right), both of its groups are flat at
#: about 1 step in 3 by chance, so 3 in a row happen in a healthy run (about 4% at any step), 5 far more rarely
#: (< 0.5%); a shorter streak is information.
ZERO_STD_WARN_STEPS = 5
CLIPPED_RATIO_MAX = 0.3
#: The cuts "block" the reward only when nearly all completions are cut (this share or more on average over the latest
#: :data:`ZERO_STD_MIN_STEPS` logged steps): with fewer, the finished ones teach the policy to finish.
CLIPPED_NEARLY_ALL = 0.9
#: Finished completions beating cut ones by this much mean total reward in the sampled groups show the policy is
#: pushed to finish, even when nearly all are cut.
CLIPPED_FINISH_GAIN = 0.05
#: ... read from at least this many finished completions (two groups' worth at the default G = 4): the mean of 3
#: finished completions among 80 cut ones (max_completion_length 6 on the quick start) is noise.
CLIPPED_MIN_FINISHED = 8
# KL (TRL's ``kl``: the mean per-token k3 estimate against the reference model, in nats; logged when beta > 0).
#: The KL term "outweighs" the learning signal when ``beta * kl`` reaches this: advantages are normalised to about
#: unit scale within a group (scale_rewards "group"), so a penalty of 0.1 per token is a tenth of a typical advantage.
#: The bound scales with beta: at beta 0.02 it is 5 nats, at 0.04 2.5 nats (DeepSeekMath's beta, Shao et al. 2024).
KL_PENALTY_SHARE = 0.1
#: Without a usable beta (0, missing), KL above this many nats per token is a blow-up whatever holds it.
KL_MAX_NATS = 10.0
#: A spike: the median of the latest :data:`KL_RECENT` points at least this many times the median of the run's own
#: :data:`KL_HISTORY` points before them. An ordinary drift grows smoothly (the quick start: 0.03 to 0.10 over 20
#: steps, about 1.5x a 10-step median); a blow-up jumps by orders of magnitude within a few steps.
KL_SPIKE_FACTOR = 10.0
KL_RECENT = 3
KL_HISTORY = 10
#: KL below this is "not started yet": growing from 1e-4 to 1e-2 in the first steps is the policy leaving the
#: reference, not a spike; also the least KL for "KL rising while the reward falls".
KL_SPIKE_FLOOR = 0.1
#: The policy "has not moved" from the reference when the run's KL never reached this after
#: :data:`TREND_MIN_STEPS` logged steps, with learning signal present. The quick start's KL is 1e-3 by step 5.
KL_STATIC = 1e-5
FLAT_REWARD_MIN_STEPS = 3
EXAMPLES = 3
#: NaN in these means the optimisation itself broke; NaN elsewhere (a rule's mean) usually means "did not apply".
CORE_KEYS = ("loss", "grad_norm", "kl", "reward", "reward_std", "entropy")
#: ``grad_norm`` at or below this is 0: the optimiser has nothing to apply (TRL logs the pre-clipping norm).
GRAD_ZERO = 1e-10
#: ``grad_norm`` "vanishing": its latest 3-point median at most this fraction of the median of its first 5 points.
GRAD_VANISH_RATIO = 1e-3
#: Groups "carry signal" when the mean ``reward_std`` over the steps read is above this.
SIGNAL_STD_MIN = 0.01
#: Fewest consecutive logged steps for the gradient checks (one step of 0 can be a skipped update).
GRAD_MIN_STEPS = 3
#: A per-rule error count TRL-style metric: ``rewards/<fn>/errors`` (reward-function calls that raised, per step).
RULE_ERRORS_SUFFIX = "/errors"
#: The metrics whose values the checks read; of the others (``rewards/<fn>/mean``, ...) only where they were NaN
#: matters (``diagnose``'s ``nan_steps``), so a reader of a long run may read the values of these alone.
SERIES_KEYS = (*CORE_KEYS, "frac_reward_zero_std", "completions/clipped_ratio", "completions/mean_length",
               "eval_reward", "learning_rate", "clip_ratio/high_mean", "sampling/sampling_logp_difference/mean",
               "sampling/importance_sampling_ratio/mean", "tools/call_frequency", "tools/failure_frequency")

# Trend tests (reward, entropy, completion length).
#: Fewest logged points a trend is judged on: Mann-Kendall's normal approximation is fair from about 10 points
#: (Kendall 1975 tabulates the exact distribution of S up to n = 10), and fewer cannot tell a trend from GRPO's
#: step-to-step noise.
TREND_MIN_STEPS = 10
#: The trend tests read the latest this-many logged points, so a run that rose early and levelled off is judged on
#: what it does now (and the O(n²) test stays cheap on every refresh).
TREND_WINDOW = 50
#: One-sided significance level: a rise (or fall) with p below this is a trend; a 1-in-20 false alarm on a flat
#: series is acceptable for advice, and a stricter level misses real but slow rises in short runs.
TREND_P_VALUE = 0.05
#: Start and end of a trended metric are the medians of this many points, so one noisy step does not decide.
TREND_ENDS = 3
#: "Not improving" is said only when the test had this power (at :data:`TREND_P_VALUE`) to see a meaningful rise;
#: with less, the doctor says "too early to tell" (power analysis of Mann-Kendall: Yue, Pilon & Cavadias 2002).
TREND_POWER = 0.8
#: A "meaningful" rise over the window tested: this share of the mean within-group ``reward_std`` (a policy that
#: learns moves the mean reward by a good part of the spread between its own completions) ...
MEANINGFUL_RISE_STD_SHARE = 0.5
#: ... and at least this much reward (so a run whose completions barely differ is not held to a tiny rise).
MEANINGFUL_RISE_MIN = 0.05
#: The "learning" finding compares the means of the first and last this-many logged rewards (fewer in short runs:
#: a third of the points each).
LEARNING_ENDS = 10
#: Entropy "surging": its latest median at least this many times its start, on a significant rise.
ENTROPY_SURGE_RATIO = 2.0
#: A task rule "falling": its mean drops by at least this share of the rule's weight-1 range (0-1) on a significant
#: fall, while the total reward does not fall.
RULE_FALL_MIN = 0.1
#: Entropy "collapsed" when its end is at most this fraction of its start: sampling has become near-greedy and
#: groups stop differing (Cui et al. 2025, "The Entropy Mechanism of RL for Reasoning LMs", arXiv 2505.22617).
ENTROPY_COLLAPSE_RATIO = 0.25
#: Mean completion length "at the limit" from this fraction of ``max_completion_length`` (the mean sits below the
#: limit even when most completions are cut).
LENGTH_NEAR_MAX = 0.9
#: Mean completion length "collapsed" when its end is at most this fraction of its start.
LENGTH_SHORT_RATIO = 0.25

# Advice tied to the run's config.
#: A LoRA adapter starts at zero and wants about 10x the full fine-tuning learning rate ("LoRA Without Regret",
#: Schulman et al. 2025); below this, a LoRA run of a few hundred steps barely moves.
LORA_LR_LOW = 5e-5
LORA_LR_SUGGESTED = 1e-4
#: Half of TRL's ``GRPOConfig`` default (1e-6), the usual rate for full-weight GRPO.
FULL_LR_LOW = 5e-7
FULL_LR_SUGGESTED = 1e-6
#: DeepSeekMath used beta 0.04 (Shao et al. 2024); far above it the KL term holds the policy at the reference.
BETA_HIGH = 0.1
BETA_SUGGESTED = 0.04
#: TRL's default group size; fewer completions make a group with both a right and a wrong answer (signal) rarer.
NUM_GENERATIONS_LOW = 8
#: A run this short rarely shows a reward trend: GRPO rewards often move only after tens to hundreds of steps.
SHORT_RUN_STEPS = 50

# Per-group checks on the sampled groups.
#: A rule "carries" the reward when it explains this share of the within-group variance of the weighted total.
RULE_SHARE_MAX = 0.8
#: Fewest sampled groups with within-group variance before shares are trusted.
RULE_SHARE_MIN_GROUPS = 4
#: How many of the latest sampled steps the pass-rate line lists.
PASS_RATE_STEPS = 6
#: The beta check reads the mean ``frac_reward_zero_std`` of this many latest logged steps: it is about now.
BETA_ZERO_STD_WINDOW = 5
# Held-out evaluation (runs with an eval split).
#: Fewest logged ``eval_reward`` points before train and eval are compared.
EVAL_MIN_POINTS = 3
#: The eval reward "follows" the train reward when it gains at least this share of the train reward's gain.
EVAL_GAIN_SHARE = 0.25
#: Scores closer than this count as equal (rewards are stored as floats).
SCORE_TOLERANCE = 1e-6

# What the doctor reads.
#: The doctor judges the latest this-many steps of a run (the dashboard's panel and the webhook alerts read no more):
#: its findings are about what the run does now, and a run of 200,000 steps is diagnosed as fast as one of 1,000.
#: Twenty times the trend window, so streaks and trends have room.
RECENT_STEPS = 1000

# Tool calling (TRL's tools/call_frequency: calls per completion; tools/failure_frequency: failed calls per call).
#: The policy "used tools" at a logged step with at least this many calls per completion, and "stopped" below
#: ``TOOLS_STOPPED_CALLS`` for ``TOOLS_STREAK`` logged steps in a row after that: a policy that learns to skip its tools
#: answers from memory, and a tool rule or environment reward that paid for calls no longer reaches it.
TOOLS_USED_CALLS = 0.2
TOOLS_STOPPED_CALLS = 0.02
TOOLS_STREAK = 3
#: Half the calls failing (an error, an unknown tool, unparsed arguments) for ``TOOLS_STREAK`` logged steps: the
#: rollouts mostly train on error messages.
TOOL_FAILURES_HIGH = 0.5
#: A quarter of the sampled completions ending on a call that got no result (``max_tool_calling_iterations`` or the
#: completion length reached mid-call): those rollouts never answer.
ITERATION_LIMIT_SHARE = 0.25
#: "Paid whether or not the tool was used": at least this many sampled completions with a tool call and as many
#: without, in a run that gives its policy tools, and those without a call score the task rule right at least as often
#: as those with one: the reward does not tell the policy to use its tools.
TOOL_UNUSED_MIN_EACH = 4

# TRL 1.16's newer signals (grpo_core.doctor.signals).
#: The ratio "pinned at the high clip": ``clip_ratio/high_mean`` (the share of tokens whose importance ratio passed
#: 1 + epsilon_high with a positive advantage, so their gradient was cut) at or above this, as the median of the latest
#: :data:`SIGNAL_RECENT` logged steps. On-policy (num_iterations 1, steps_per_generation = gradient_accumulation_steps)
#: the ratio is 1 and nothing clips; PPO practice reads a clip fraction past 0.2 as updates too large for the trust
#: region ("The 37 Implementation Details of PPO", Huang et al. 2022, on ``clipfrac``), and a fifth of all tokens is
#: more than that among the positive-advantage tokens alone.
CLIP_HIGH_SHARE = 0.2
#: Steps a signal is judged on: the median of the latest this-many logged points (one noisy step does not decide).
SIGNAL_RECENT = 3
#: Trainer and generator "disagree" (vLLM): the mean per-token |logp_vllm - logp_trainer|
#: (``sampling/sampling_logp_difference/mean``) at or above this many nats. The same weights in bf16 differ by about
#: 1e-3 to 1e-2 nats a token between a vLLM engine and the trainer; 0.05 is past that, where truncated importance
#: sampling is needed to stay unbiased (Yao et al. 2025, "Your Efficient RL Framework Secretly Brings You Off-Policy
#: RL Training", fengyao.notion.site).
SAMPLING_LOGP_DIFF_MAX = 0.05
#: ... or the mean importance-sampling ratio pi_trainer / pi_vllm (``sampling/importance_sampling_ratio/mean``)
#: outside this band (1 when they agree).
SAMPLING_IS_RATIO_BAND = (0.8, 1.25)
#: A ``grad_norm`` spike: a point at least this many times the median of the :data:`GRAD_SPIKE_HISTORY` logged points
#: before it (TRL logs the norm before clipping to max_grad_norm). GRPO's step-to-step grad_norm noise is within a few
#: times its median (the recorded corpus runs); a 10x jump is the loss meeting something new (a degenerate
#: completion, a reward outlier), the first sign of a divergence.
GRAD_SPIKE_FACTOR = 10.0
GRAD_SPIKE_HISTORY = 10
#: Spikes are looked for among the latest this-many logged points (what the run does now).
GRAD_SPIKE_WINDOW = 50
