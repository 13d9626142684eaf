"""Between the caller and the strategies: array adaptation and delivery, axis and
layout rules, jobs (what a strategy receives) and bin rules."""
