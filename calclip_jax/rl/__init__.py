"""Model-agnostic RL core: advantages, policy losses, corrections, calibration, diagnostics."""
