package emulator

// RefreshMonitoring publishes the PT consumption now, as the background loop
// does once per scenario minute.
func (e *Emulator) RefreshMonitoring() { e.monitoring.refresh(e.clock.Elapsed()) }
