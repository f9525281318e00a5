package jetstore

// OnGroupWait makes s call f whenever a GroupRoot call starts waiting for
// another call's claim of reset group key.
func OnGroupWait(s *Store, f func(key string)) { s.onWait = f }
