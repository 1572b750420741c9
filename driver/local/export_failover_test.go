package local

// The points where Ensure calls a hook set by SetTestHook.
const (
	HookBeforePrimary  = hookBeforePrimary
	HookAdopting       = hookAdopting
	HookImportLoaded   = hookImportLoaded
	HookImportTookOver = hookImportTookOver
	HookLivePid        = hookLivePid
)

// SetTestHook makes Ensure call f at the hook points, with the database's id and the pid
// of the server concerned (0 if none). Set it before the driver's first call.
func (d *Driver) SetTestHook(f func(point string, id, pid int)) { d.testHook = f }
