-- oltp_csd.lua: sysbench 1.0 OLTP read/write on the compressible schema of
-- seeds/003 (Percona's ScaleFlux CSD 2000 study): the usual sbtest columns
-- plus two VARCHAR(255) columns, data1 (indexed) and data2, filled with
-- compressible text. Written for tools/bench; not derived from sysbench's
-- bundled scripts.
--
--   sysbench oltp_csd.lua --tables=4 --table-size=250000 --threads=4 prepare
--   sysbench oltp_csd.lua --tables=4 --table-size=250000 --threads=4 --time=60 run
--
-- One transaction (like oltp_read_write with its default counts):
--   BEGIN; 10 point selects; 1 data1 index probe; 1 simple range; 1 SUM range;
--   1 ORDER BY range; 1 DISTINCT range; UPDATE k,data1 (index update);
--   UPDATE c,data2 (non-index update); DELETE + INSERT of one row; COMMIT
-- --mode=ro keeps only the reads (like oltp_read_only), --mode=wo only the
-- writes (like oltp_write_only); tools/mysql-study runs all three.
--
-- The text: space-separated tokens, 3 of 4 drawn from a fixed 256-word
-- vocabulary (made by a fixed-seed generator, identical in every run and
-- thread), 1 of 4 a random 6-character [a-z0-9] token. zstd -1 compresses it
-- about 2.3:1 in 16 KiB pieces (3:1 with words only).

sysbench.cmdline.options = {
   tables = {"number of tables", 4},
   table_size = {"rows per table", 10000},
   range_size = {"rows per range query", 100},
   point_selects = {"point selects per transaction", 10},
   prepare_batch = {"rows per INSERT statement during prepare", 500},
   word_share = {"share of vocabulary words in the text, 0..1", 0.75},
   mode = {"rw (reads and writes), ro (reads only) or wo (writes only)", "rw"},
   mysql_storage_engine = {"storage engine", "innodb"},
}

local TEXT_LEN = 255
local ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"
local vocab = {}

-- a fixed vocabulary: 256 words of 3..9 letters from a 31-bit LCG with a
-- constant seed, so every thread and every run speaks the same language
local function build_vocab()
   local seed = 20240601
   local function nxt()
      seed = (seed * 1103515245 + 12345) % 2147483648
      return seed
   end
   for i = 1, 256 do
      local len = 3 + nxt() % 7
      local w = {}
      for j = 1, len do
         local r = math.floor(nxt() / 65536) % 26
         w[j] = string.char(97 + r)
      end
      vocab[i] = table.concat(w)
   end
end
build_vocab()

-- compressible text of exactly n characters
local function text(n)
   local parts, len, i = {}, 0, 0
   local share = sysbench.opt.word_share * 1000
   while len < n do
      local tok
      if sysbench.rand.uniform(1, 1000) <= share then
         tok = vocab[sysbench.rand.uniform(1, 256)]
      else
         local c = {}
         for j = 1, 6 do
            local r = sysbench.rand.uniform(1, 36)
            c[j] = ALNUM:sub(r, r)
         end
         tok = table.concat(c)
      end
      i = i + 1
      parts[i] = tok
      len = len + #tok + 1
   end
   return table.concat(parts, " "):sub(1, n)
end

local C_PATTERN = "###########-###########-###########-###########-###########-" ..
                  "###########-###########-###########-###########-###########"
local PAD_PATTERN = "###########-###########-###########-###########-###########"

local function rand_id()
   return sysbench.rand.default(1, sysbench.opt.table_size)
end

-- ---------------------------------------------------------------- prepare

local function create_table(con, n)
   print(string.format("creating table sbtest%d (%d rows)", n, sysbench.opt.table_size))
   con:query("DROP TABLE IF EXISTS sbtest" .. n)
   con:query(string.format([[
CREATE TABLE sbtest%d (
  id INT NOT NULL AUTO_INCREMENT,
  k INT NOT NULL DEFAULT 0,
  c CHAR(120) NOT NULL DEFAULT '',
  pad CHAR(60) NOT NULL DEFAULT '',
  data1 VARCHAR(255) DEFAULT NULL,
  data2 VARCHAR(255) DEFAULT NULL,
  PRIMARY KEY (id)
) ENGINE=%s DEFAULT CHARSET=utf8mb4]], n, sysbench.opt.mysql_storage_engine))

   local batch = sysbench.opt.prepare_batch
   local id = 0
   while id < sysbench.opt.table_size do
      local vals = {}
      local last = math.min(id + batch, sysbench.opt.table_size)
      for r = id + 1, last do
         vals[#vals + 1] = string.format("(%d,%d,'%s','%s','%s','%s')", r,
            sysbench.rand.default(1, sysbench.opt.table_size),
            sysbench.rand.string(C_PATTERN), sysbench.rand.string(PAD_PATTERN),
            text(TEXT_LEN), text(TEXT_LEN))
      end
      con:query("INSERT INTO sbtest" .. n ..
                " (id, k, c, pad, data1, data2) VALUES " .. table.concat(vals, ","))
      id = last
   end
   -- secondary indexes after the load, as seeds/003's schema has them
   con:query(string.format("ALTER TABLE sbtest%d ADD KEY k_1 (k), ADD KEY idx_data1 (data1)", n))
end

function cmd_prepare()
   local drv = sysbench.sql.driver()
   local con = drv:connect()
   -- tables are shared out among the threads
   for n = sysbench.tid % sysbench.opt.threads + 1, sysbench.opt.tables,
         sysbench.opt.threads do
      create_table(con, n)
   end
   con:disconnect()
end

function cmd_cleanup()
   local drv = sysbench.sql.driver()
   local con = drv:connect()
   for n = 1, sysbench.opt.tables do
      con:query("DROP TABLE IF EXISTS sbtest" .. n)
   end
   con:disconnect()
end

sysbench.cmdline.commands = {
   prepare = {cmd_prepare, sysbench.cmdline.PARALLEL_COMMAND},
   cleanup = {cmd_cleanup},
}

-- ---------------------------------------------------------------- run

local T = sysbench.sql.type
local SQL = {
   point = {"SELECT c FROM sbtest%d WHERE id=?", {T.INT}},
   probe = {"SELECT id, data2 FROM sbtest%d WHERE data1=?", {T.VARCHAR, TEXT_LEN}},
   simple = {"SELECT c FROM sbtest%d WHERE id BETWEEN ? AND ?", {T.INT}, {T.INT}},
   sum = {"SELECT SUM(k) FROM sbtest%d WHERE id BETWEEN ? AND ?", {T.INT}, {T.INT}},
   order = {"SELECT c FROM sbtest%d WHERE id BETWEEN ? AND ? ORDER BY c", {T.INT}, {T.INT}},
   distinct = {"SELECT DISTINCT c FROM sbtest%d WHERE id BETWEEN ? AND ? ORDER BY c",
               {T.INT}, {T.INT}},
   upd_index = {"UPDATE sbtest%d SET k=k+1, data1=? WHERE id=?",
                {T.VARCHAR, TEXT_LEN}, {T.INT}},
   upd_nonindex = {"UPDATE sbtest%d SET c=?, data2=? WHERE id=?",
                   {T.CHAR, 120}, {T.VARCHAR, TEXT_LEN}, {T.INT}},
   delete = {"DELETE FROM sbtest%d WHERE id=?", {T.INT}},
   insert = {"INSERT INTO sbtest%d (id, k, c, pad, data1, data2) VALUES (?,?,?,?,?,?)",
             {T.INT}, {T.INT}, {T.CHAR, 120}, {T.CHAR, 60},
             {T.VARCHAR, TEXT_LEN}, {T.VARCHAR, TEXT_LEN}},
}

local con, begin_stmt, commit_stmt
local stmts = {}   -- stmts[table][name] = {stmt = ..., p = {params}}

local function prepare_statements()
   begin_stmt = con:prepare("BEGIN")
   commit_stmt = con:prepare("COMMIT")
   for n = 1, sysbench.opt.tables do
      stmts[n] = {}
      for name, def in pairs(SQL) do
         local st = con:prepare(string.format(def[1], n))
         local p = {}
         for i = 2, #def do
            p[i - 1] = st:bind_create(def[i][1], def[i][2])
         end
         st:bind_param(unpack(p))
         stmts[n][name] = {stmt = st, p = p}
      end
   end
end

local function close_statements()
   for n = 1, #stmts do
      for _, s in pairs(stmts[n]) do
         s.stmt:close()
      end
   end
   stmts = {}
   if begin_stmt then begin_stmt:close() end
   if commit_stmt then commit_stmt:close() end
end

function thread_init()
   local m = sysbench.opt.mode
   if m ~= "rw" and m ~= "ro" and m ~= "wo" then
      error("oltp_csd.lua: --mode must be rw, ro or wo, not '" .. tostring(m) .. "'")
   end
   local drv = sysbench.sql.driver()
   con = drv:connect()
   prepare_statements()
end

function thread_done()
   close_statements()
   con:disconnect()
end

-- after a lost connection reconnect; after a deadlock/lock wait timeout InnoDB
-- has already rolled the transaction back and the event simply starts again
function sysbench.hooks.before_restart_event(err)
   if err.sql_errno == 2013 or err.sql_errno == 2055 or err.sql_errno == 2006 then
      close_statements()
      con:reconnect()
      prepare_statements()
   end
end

local function range(s)
   local lo = rand_id()
   s.p[1]:set(lo)
   s.p[2]:set(lo + sysbench.opt.range_size - 1)
   s.stmt:execute()
end

-- the reads of one transaction
local function reads(s)
   for i = 1, sysbench.opt.point_selects do
      s.point.p[1]:set(rand_id())
      s.point.stmt:execute()
   end
   s.probe.p[1]:set(text(TEXT_LEN))
   s.probe.stmt:execute()
   range(s.simple)
   range(s.sum)
   range(s.order)
   range(s.distinct)
end

-- the writes of one transaction
local function writes(s)
   s.upd_index.p[1]:set(text(TEXT_LEN))
   s.upd_index.p[2]:set(rand_id())
   s.upd_index.stmt:execute()

   s.upd_nonindex.p[1]:set_rand_str(C_PATTERN)
   s.upd_nonindex.p[2]:set(text(TEXT_LEN))
   s.upd_nonindex.p[3]:set(rand_id())
   s.upd_nonindex.stmt:execute()

   local id = rand_id()
   s.delete.p[1]:set(id)
   s.delete.stmt:execute()
   local ins = s.insert.p
   ins[1]:set(id)
   ins[2]:set(sysbench.rand.default(1, sysbench.opt.table_size))
   ins[3]:set_rand_str(C_PATTERN)
   ins[4]:set_rand_str(PAD_PATTERN)
   ins[5]:set(text(TEXT_LEN))
   ins[6]:set(text(TEXT_LEN))
   s.insert.stmt:execute()
end

function event()
   local n = sysbench.rand.uniform(1, sysbench.opt.tables)
   local s = stmts[n]
   begin_stmt:execute()
   if sysbench.opt.mode ~= "wo" then
      reads(s)
   end
   if sysbench.opt.mode ~= "ro" then
      writes(s)
   end
   commit_stmt:execute()
end
