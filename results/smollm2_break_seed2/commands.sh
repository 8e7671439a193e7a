# Seed 2's view of ../smollm2_break: symlinks to its runs (their commands, with --config.seed=2,
# are in ../smollm2_break/commands.sh), and its reports, from these commands. docs/break_regime.md's
# seed-2 paragraphs read them with --last_step at each block's end (20, 40, 60, 80, and 100 for
# BF16, the one arm whose last block landed before the host's disk was lost).
python -m experiments.paired_report --sweep=results/smollm2_break_seed2 --baseline=bf16 --out=results/smollm2_break_seed2/paired.md --curves_figure=results/smollm2_break_seed2/dynamics.png --bounds_figure=results/smollm2_break_seed2/bounds.png
python -m experiments.working_fidelity --sweep=results/smollm2_break_seed2 --baseline=bf16 --surprisal --out=results/smollm2_break_seed2/working_fidelity.md --figure=results/smollm2_break_seed2/working_fidelity.png
python -m experiments.clipped_trace --sweep=results/smollm2_break_seed2 --out=results/smollm2_break_seed2/clipped_trace.md
python -m experiments.garbled_coincidence --sweep=results/smollm2_break_seed2 --out=results/smollm2_break_seed2/garbled_coincidence.md
