package request_test

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/request"
)

func Example() {
	// Every spelling of one request comes to one form...
	for _, s := range [][3]string{
		{"POST", "/login", "api.example.com"},
		{"post", "//%6Cogin/", "API.example.com.:8443"},
		{"pOsT", "/static/../login", "api.example.com"},
	} {
		c, err := request.New(s[0], s[1], s[2])
		fmt.Println(c, err)
	}
	// ...and what has none is malformed: answer 400.
	_, err := request.New("POST", "/login", "api.example.com..")
	fmt.Println(err, errors.Is(err, request.ErrMalformed))
	// Output:
	// {POST api.example.com /login} <nil>
	// {POST api.example.com /login} <nil>
	// {POST api.example.com /login} <nil>
	// malformed request: host: empty label true
}
