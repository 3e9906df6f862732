// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package main

import "errors"

func serveEpoll(string, string) error { return errors.New("go_epoll needs Linux's epoll") }

const rawReadEnv = "PROXYNGINX_RAWREAD"

func serveRawRead(string, string) error { return errors.New("go_rawread is built for Linux only") }
