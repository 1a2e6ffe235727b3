"""Templates: versioned job specs with typed parameters."""
