"""Controller core: pure logic, no I/O."""
