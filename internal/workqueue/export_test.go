package workqueue

import "io"

// SetUpload makes the worker's result uploads read what f returns for
// the result's bytes (a test stops an upload half way with it).
func SetUpload(o *WorkerOptions, f func(data []byte) io.Reader) { o.upload = f }
