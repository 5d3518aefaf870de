"""Running an evaluation: the runner (tasks x prompts on a backend), its resume cache, the
plan and time estimate printed before a run, and the names of output folders."""
