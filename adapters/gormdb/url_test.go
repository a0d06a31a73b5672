package gormdb

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseURL_ErrorOmitsPassword(t *testing.T) {
	_, _, err := ParseURL("postgres://app:s3cret@bad host:5432/db")

	assert.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cret")
}

func TestParseURL(t *testing.T) {
	cases := []struct {
		raw     string
		dialect Dialect
		wantErr bool
	}{
		{raw: "postgres://u:p@db:5432/app?sslmode=disable", dialect: Postgres},
		{raw: "postgresql://u@db/app", dialect: Postgres},
		{raw: "mysql://u:p@db:3306/app", dialect: MySQL},
		{raw: "mysql://u:p@db:3306/", wantErr: true},
		{raw: "sqlite://app.db", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.raw, func(t *testing.T) {
			dialect, dsn, err := ParseURL(tc.raw)
			if tc.wantErr {
				assert.Error(t, err)
				return
			}
			assert.NoError(t, err)
			assert.Equal(t, tc.dialect, dialect)
			assert.NotEmpty(t, dsn)
		})
	}
}
