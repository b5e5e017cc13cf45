#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# etcd_certs.sh DIR: the certificates the etcd TLS tests use, made in DIR with
# openssl (P-256 keys, one day):
#   ca.crt          the cluster's CA
#   server.{crt,key} etcd's, for IP 127.0.0.1 and localhost, signed by ca
#   client.{crt,key} a client's, signed by ca, without a CommonName: etcd 3.4's
#                    HTTP gateway answers 400 to a client certificate that has one
#   cn.{crt,key}     a client's with CommonName "sigma", signed by ca
#   rogue.{crt,key}  a client's signed by another CA (other.crt)
set -eu
d=$1
cd "$d"
umask 077
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null; }
ca() {
	key "$1"
	openssl req -x509 -new -key "$1.key" -out "$1.crt" -days 1 -subj "/CN=$2" 2>/dev/null
}
# leaf NAME SUBJECT CA EXT
leaf() {
	key "$1"
	openssl req -new -key "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
	openssl x509 -req -in "$1.csr" -CA "$3.crt" -CAkey "$3.key" -CAcreateserial \
		-out "$1.crt" -days 1 -extfile "$4" 2>/dev/null
	rm -f "$1.csr"
}
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' >srv.ext
printf 'extendedKeyUsage=clientAuth\n' >cli.ext
ca ca sigma-test-ca
ca other sigma-other-ca
leaf server /CN=etcd ca srv.ext
leaf client /O=sigma-test ca cli.ext
leaf cn /CN=sigma ca cli.ext
leaf rogue /O=sigma-rogue other cli.ext
