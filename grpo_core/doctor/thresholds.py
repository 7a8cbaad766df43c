"""The run doctor's thresholds, each with why it has its value (read by every check in :mod:`grpo_core.doctor`)."""

ZERO_STD_FRACTION = 0.5
ZERO_STD_MIN_STEPS = 3
CLIPPED_RATIO_MAX = 0.3
KL_MAX = 0.5
KL_GROWTH_FACTOR = 3.0
KL_GROWTH_WINDOW = 5
#: KL below this is treated as "not started yet": going from 1e-5 to 3e-5 is not drift.
KL_GROWTH_FLOOR = 0.01
FLAT_REWARD_MIN_STEPS = 3
EXAMPLES = 3
#: NaN in these means the optimisation itself broke; NaN elsewhere (a rule's mean) usually means "did not apply".
CORE_KEYS = ("loss", "grad_norm", "kl", "reward", "reward_std", "entropy")
#: The metrics whose values the checks read; of the others (``rewards/<fn>/mean``, ...) only where they were NaN
#: matters (``diagnose``'s ``nan_steps``), so a reader of a long run may read the values of these alone.
SERIES_KEYS = (*CORE_KEYS, "frac_reward_zero_std", "completions/clipped_ratio", "completions/mean_length",
               "eval_reward")

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
