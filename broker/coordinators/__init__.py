"""coordinators."""
