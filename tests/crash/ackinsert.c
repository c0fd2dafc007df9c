/* SPDX-License-Identifier: MIT */
/*
 * ackinsert: the acknowledged-commit client of t_mariadb_crash.sh.
 *
 * It inserts rows into one InnoDB table one at a time, each in its own
 * transaction, and appends a row's id to a file on the host (outside the
 * mount) only after the server acknowledged its COMMIT: mysql_commit()
 * returned 0, i.e. the server's OK packet arrived. With
 * innodb_flush_log_at_trx_commit=1 that OK means InnoDB fsynced its redo
 * log, so after any crash of mariadbd and csdfs (SPEC G2) every id in the
 * file must be in the table. An id whose COMMIT was sent but not answered
 * is not written: it may or may not have survived, and either is right.
 *
 * Each id is one write(2) of one line, no stdio buffer, so a kill -9 of this
 * client keeps every line it wrote. Ids continue after the table's MAX(id),
 * so a row committed but never acknowledged does not collide with the next
 * run's ids. Every wait on the server is bounded (connect, read and write
 * timeouts).
 *
 * usage: ackinsert --socket PATH --table DB.TABLE --acked FILE
 *                  [--user NAME] [--seconds N] [--seed N]
 * Exit status: 0 when the time is up, 1 on bad usage or when the first
 * connection fails, 2 when a statement failed later (what a crash of the
 * server looks like from here).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mysql.h>

#define PROG "ackinsert"
#define TIMEOUT_S 60u

struct ack_opts {
	const char *socket, *table, *acked, *user;
	unsigned seconds;
	unsigned long seed;
};

static void usage(void)
{
	fprintf(stderr, "usage: " PROG " --socket PATH --table DB.TABLE --acked FILE"
		" [--user NAME] [--seconds N] [--seed N]\n");
	exit(1);
}

static int parse_opts(int argc, char **argv, struct ack_opts *o)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "table", required_argument, NULL, 't' },
		{ "acked", required_argument, NULL, 'a' },
		{ "user", required_argument, NULL, 'u' },
		{ "seconds", required_argument, NULL, 'n' },
		{ "seed", required_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	int c;

	*o = (struct ack_opts){ .user = "root", .seconds = 600, .seed = 1 };
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 's': o->socket = optarg; break;
		case 't': o->table = optarg; break;
		case 'a': o->acked = optarg; break;
		case 'u': o->user = optarg; break;
		case 'n':
		case 'r':
			errno = 0;
			unsigned long v = strtoul(optarg, &end, 10);
			if (errno || *end || end == optarg) {
				fprintf(stderr, PROG ": '%s' is not a number\n", optarg);
				return -1;
			}
			if (c == 'n')
				o->seconds = (unsigned)v;
			else
				o->seed = v;
			break;
		default:
			usage();
		}
	}
	if (optind != argc || !o->socket || !o->table || !o->acked)
		usage();
	if (strchr(o->table, '\'') || strchr(o->table, ';')) {
		fprintf(stderr, PROG ": '%s' is not a plain DB.TABLE name\n", o->table);
		return -1;
	}
	return 0;
}

static MYSQL *connect_server(const struct ack_opts *o)
{
	unsigned t = TIMEOUT_S;
	MYSQL *db = mysql_init(NULL);

	if (!db) {
		fprintf(stderr, PROG ": out of memory in mysql_init\n");
		return NULL;
	}
	mysql_options(db, MYSQL_OPT_CONNECT_TIMEOUT, &t);
	mysql_options(db, MYSQL_OPT_READ_TIMEOUT, &t);
	mysql_options(db, MYSQL_OPT_WRITE_TIMEOUT, &t);
	if (!mysql_real_connect(db, NULL, o->user, NULL, NULL, 0, o->socket, 0)) {
		fprintf(stderr, PROG ": cannot connect to '%s': %s\n", o->socket,
			mysql_error(db));
		mysql_close(db);
		return NULL;
	}
	return db;
}

/* The table's MAX(id), or -1 with a message. */
static long long max_id(MYSQL *db, const char *table)
{
	char q[256];
	MYSQL_RES *res;
	MYSQL_ROW row;
	long long v = -1;

	snprintf(q, sizeof(q), "SELECT COALESCE(MAX(id), 0) FROM %s", table);
	if (mysql_query(db, q) || !(res = mysql_store_result(db))) {
		fprintf(stderr, PROG ": '%s' failed: %s\n", q, mysql_error(db));
		return -1;
	}
	row = mysql_fetch_row(res);
	if (row && row[0])
		v = strtoll(row[0], NULL, 10);
	mysql_free_result(res);
	return v;
}

/* xorshift64: the row filler, reproducible from --seed */
static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* One row's statement: a compressible pad (a repeated letter, as in the
 * Percona schema), a hex column and ROW_RAND_MIN..MAX random bytes. The
 * random bytes make the redo log and the pages incompressible enough that
 * csdfs stores most of a 16 KiB chunk, so a torn write has a tail to lose. */
#define ROW_RAND_MIN 512u
#define ROW_RAND_MAX 2048u
#define ROW_SQL_MAX (2 * ROW_RAND_MAX + 512)

static void row_sql(char *q, size_t qlen, const char *table, long long id, uint64_t *rs)
{
	uint64_t a = next_rand(rs), b = next_rand(rs);
	unsigned n = ROW_RAND_MIN + (unsigned)(a >> 32) % (ROW_RAND_MAX - ROW_RAND_MIN + 1);
	int len = snprintf(q, qlen,
			   "INSERT INTO %s (id, pad, h, r) VALUES (%lld, REPEAT('%c', %u), "
			   "'%016llx%016llx', X'", table, id, 'a' + (int)(a % 26),
			   20 + (unsigned)(b % 180), (unsigned long long)a, (unsigned long long)b);

	for (unsigned i = 0; i < n && (size_t)len + 4 < qlen; i++)
		len += snprintf(q + len, qlen - (size_t)len, "%02x",
				(unsigned)(next_rand(rs) & 0xff));
	snprintf(q + len, qlen - (size_t)len, "')");
}

static int write_id(int fd, const char *path, long long id)
{
	char line[32];
	int n = snprintf(line, sizeof(line), "%lld\n", id);

	if (write(fd, line, (size_t)n) != n) {
		fprintf(stderr, PROG ": cannot append to '%s': %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct ack_opts o;
	char q[ROW_SQL_MAX];
	long long id, acked = 0, last = 0;
	uint64_t rs;
	time_t end;
	MYSQL *db;
	int fd, rc = 0;

	if (parse_opts(argc, argv, &o))
		return 1;
	rs = o.seed * 0x9e3779b97f4a7c15ull | 1;
	fd = open(o.acked, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, PROG ": cannot open '%s': %s\n", o.acked, strerror(errno));
		return 1;
	}
	db = connect_server(&o);
	if (!db) {
		close(fd);
		return 1;
	}
	id = max_id(db, o.table);
	if (id < 0 || mysql_autocommit(db, 0)) {
		if (id >= 0)
			fprintf(stderr, PROG ": cannot turn autocommit off: %s\n", mysql_error(db));
		rc = 1;
		goto out_close;
	}
	end = time(NULL) + (time_t)o.seconds;
	while (time(NULL) < end) {
		id++;
		row_sql(q, sizeof(q), o.table, id, &rs);
		if (mysql_query(db, q)) {
			fprintf(stderr, PROG ": insert of id %lld failed: %s\n", id, mysql_error(db));
			rc = 2;
			break;
		}
		/* the server's OK to COMMIT is the acknowledgement */
		if (mysql_commit(db)) {
			fprintf(stderr, PROG ": commit of id %lld failed: %s\n", id, mysql_error(db));
			rc = 2;
			break;
		}
		if (write_id(fd, o.acked, id)) {
			rc = 1;
			break;
		}
		acked++;
		last = id;
	}
	fprintf(stderr, PROG ": %lld commits acknowledged, last id %lld\n", acked, last);
out_close:
	mysql_close(db);
	close(fd);
	return rc;
}
