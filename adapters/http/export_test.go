package http

// ErrorCodes returns every code the status table maps, so tests can check the OpenAPI document
// names them all.
func ErrorCodes() []string {
	codes := make([]string, 0, len(statusByCode))
	for code := range statusByCode {
		codes = append(codes, code)
	}
	return codes
}
