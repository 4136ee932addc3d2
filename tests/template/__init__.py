"""Template tests: template.yaml's resources, wiring and parameters, and every function started
cold from it (`make template-tests`)."""
