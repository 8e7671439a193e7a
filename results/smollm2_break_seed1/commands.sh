# Seed 1's view of ../smollm2_break: symlinks to its runs (their commands are in
# ../smollm2_break/commands.sh), and its reports, from these commands. docs/break_regime.md's
# seed-1 paragraphs read them with --last_step at each block's end (20, 40, 60, 80).
python -m experiments.paired_report --sweep=results/smollm2_break_seed1 --baseline=bf16 --out=results/smollm2_break_seed1/paired.md --curves_figure=results/smollm2_break_seed1/dynamics.png --bounds_figure=results/smollm2_break_seed1/bounds.png
python -m experiments.working_fidelity --sweep=results/smollm2_break_seed1 --baseline=bf16 --surprisal --out=results/smollm2_break_seed1/working_fidelity.md --figure=results/smollm2_break_seed1/working_fidelity.png
python -m experiments.clipped_trace --sweep=results/smollm2_break_seed1 --out=results/smollm2_break_seed1/clipped_trace.md
python -m experiments.garbled_coincidence --sweep=results/smollm2_break_seed1 --out=results/smollm2_break_seed1/garbled_coincidence.md
