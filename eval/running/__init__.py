"""Running an evaluation: the runner (tasks x prompts on a backend), its resume cache, the entries a run evaluates
(selection), the run's identity and folder, and the plan and time estimate printed before a run."""
