-- Wireshark dissector for MRC (Multipath Reliable Connection, OCP MRC 1.0) over RoCEv2.
--
-- Field layouts: docs/mrc-brief.md section 2 as pinned in mrc-rs (transport/src/wire/).
-- Usage:
--   tshark -X lua_script:tools/wireshark/mrc.lua -r capture.pcap -V
--   (or copy into ~/.local/lib/wireshark/plugins/)
--
-- Registration: replaces the stock RoCEv2 ("infiniband") entry of udp.port 4791. Frames whose
-- BTH opcode is one of MRC's (0xC6-0xCB, 0xD1, 0xD8, 0xD9, 0xDC-0xDE) are decoded here, BTH
-- included; every other opcode is handed to the stock dissector unchanged. The same function is
-- also a heuristic on "udp": MRC puts entropy in the UDP source port (in SRv6 mode, a small EV
-- index that can collide with well-known ports such as echo/7), so when a frame shows up as
-- some other protocol, run with `-o udp.try_heuristic_first:TRUE`.
--
-- A frame whose outermost IPv6 DSCP is a "trimmed" code point (preferences, 12 and 16 by
-- default) is marked TRIMMED, decoded as far as its bytes go, and its last bytes are not
-- shown as an ICRC.

local mrc = Proto("mrc", "MRC (Multipath Reliable Connection)")

mrc.prefs.udp_port = Pref.uint("UDP port", 4791, "UDP destination port of MRC/RoCEv2")
mrc.prefs.dscp_trimmed = Pref.uint("DSCP trimmed", 12, "DSCP a switch rewrites a trimmed frame to")
mrc.prefs.dscp_trimmed_lasthop = Pref.uint("DSCP trimmed at last hop", 16,
    "DSCP the last-hop switch rewrites a trimmed frame to")

local opcodes = {
    [0xC6] = "WRITE_FIRST", [0xC7] = "WRITE_MIDDLE", [0xC8] = "WRITE_LAST",
    [0xC9] = "WRITE_LAST_IMM", [0xCA] = "WRITE_ONLY", [0xCB] = "WRITE_ONLY_IMM",
    [0xD1] = "ACK", [0xD8] = "EP_REQ", [0xD9] = "EP_RESP",
    [0xDC] = "SACK", [0xDD] = "NACK", [0xDE] = "PROBE",
}
local verdicts = { [0] = "NONE", [1] = "SKIP_ONCE", [2] = "ALWAYS_SKIP", [3] = "UNKNOWN" }
local reasons = {
    [0x01] = "TRIMMED", [0x02] = "TRIMMED_LASTHOP", [0x06] = "NO_BITMAP",
    [0x07] = "NO_PKT_BUFFER", [0x0A] = "NO_RESOURCE", [0x0B] = "PSN_OOR_WINDOW",
    [0x19] = "UNEXP_EVENT",
}
local ep_ops = { [0] = "PORT_STATUS_UPDATE", [1] = "EV_PROBE", [2] = "UNKNOWN", [3] = "UNKNOWN" }

local F = ProtoField
local f = {
    -- BTH, brief 2.5
    opcode = F.uint8("mrc.bth.opcode", "Opcode", base.HEX, opcodes),
    se = F.bool("mrc.bth.se", "Solicited event", 8, nil, 0x80),
    m = F.bool("mrc.bth.m", "MigReq", 8, nil, 0x40),
    padcnt = F.uint8("mrc.bth.padcnt", "Pad count", base.DEC, nil, 0x30),
    tver = F.uint8("mrc.bth.tver", "Header version", base.DEC, nil, 0x0F),
    pkey = F.uint16("mrc.bth.pkey", "Partition key", base.HEX),
    resv8a = F.uint8("mrc.bth.resv8a", "Reserved (ICRC-masked)", base.HEX),
    destqp = F.uint24("mrc.bth.destqp", "Destination QP", base.HEX),
    ackreq = F.bool("mrc.bth.ackreq", "Ack request", 8, nil, 0x80),
    rtx = F.bool("mrc.bth.rtx", "Retransmission (rtx)", 8, nil, 0x40),
    ts = F.bool("mrc.bth.ts", "TSETH present (ts)", 8, nil, 0x20),
    psn = F.uint24("mrc.bth.psn", "PSN", base.DEC),
    -- METH, brief 2.6
    rqmsn = F.uint16("mrc.meth.rqmsn", "RQMSN", base.DEC),
    msn = F.uint16("mrc.meth.msn", "MSN", base.DEC),
    -- TSETH, brief 2.7
    tseth_ts = F.uint16("mrc.tseth.timestamp", "TX timestamp (128 ns units)", base.DEC),
    tseth_tsr = F.bool("mrc.tseth.tsr", "TSR", 16, nil, 0x8000),
    tseth_fmt = F.uint16("mrc.tseth.format", "Format type", base.DEC, nil, 0x000F),
    -- RETH, brief 2.8
    va = F.uint64("mrc.reth.va", "Virtual address", base.HEX),
    rkey = F.uint32("mrc.reth.rkey", "R_Key", base.HEX),
    dmalen = F.uint32("mrc.reth.dmalen", "DMA length", base.DEC),
    -- ImmDt
    imm = F.uint32("mrc.immdt", "Immediate data", base.HEX),
    -- AETH, brief 2.13
    syndrome = F.uint8("mrc.aeth.syndrome", "Syndrome", base.HEX),
    aeth_msn = F.uint24("mrc.aeth.msn", "MSN", base.DEC),
    -- SETH, brief 2.9
    seth_type = F.uint16("mrc.seth.type", "Type", base.DEC, nil, 0xF000),
    seth_next = F.uint16("mrc.seth.next", "Next", base.DEC, nil, 0x0F80),
    seth_m = F.uint16("mrc.seth.m", "Multipath verdict (M)", base.DEC, verdicts, 0x0060),
    seth_pr = F.bool("mrc.seth.pr", "Probe response (PR)", 16, nil, 0x0001),
    ack_psn_offset = F.int16("mrc.seth.ack_psn_offset", "ACK PSN offset", base.DEC),
    seth_entropy = F.uint32("mrc.seth.entropy", "Entropy (reflected EV)", base.HEX),
    seth_spdcid = F.uint16("mrc.seth.spdcid", "Source PDC id", base.DEC),
    seth_dpdcid = F.uint16("mrc.seth.dpdcid", "Destination PDC id", base.DEC),
    cack_psn = F.uint24("mrc.seth.cack_psn", "Cumulative ACK PSN", base.DEC),
    seth_cc_type = F.uint8("mrc.seth.cc_type", "CC type", base.DEC, nil, 0xF0),
    seth_cc_flags = F.uint8("mrc.seth.cc_flags", "CC flags", base.HEX, nil, 0x0F),
    mpr = F.uint8("mrc.seth.mpr", "MPR (x128 PSNs)", base.DEC),
    sack_offset = F.int16("mrc.seth.sack_offset", "SACK bitmap offset", base.DEC),
    sack_bitmap = F.uint64("mrc.seth.sack_bitmap", "SACK bitmap", base.HEX),
    -- CC_STATE, brief 2.9
    cc_ts = F.uint16("mrc.cc_state.timestamp", "Reflected TX timestamp", base.DEC),
    ooo = F.uint16("mrc.cc_state.ooo_count", "Out-of-order count", base.DEC, nil, 0x7FFF),
    restore = F.bool("mrc.cc_state.restore_cwnd", "Restore cwnd", 8, nil, 0x80),
    pen = F.uint8("mrc.cc_state.rcv_cwnd_pen", "Receiver cwnd penalty", base.DEC, nil, 0x7F),
    rcvd = F.uint24("mrc.cc_state.rcvd_bytes", "Received bytes (x256)", base.DEC),
    -- NETH, brief 2.10
    neth_type = F.uint16("mrc.neth.type", "Type", base.DEC, nil, 0xF000),
    neth_next = F.uint16("mrc.neth.next", "Next", base.DEC, nil, 0x0F80),
    reason = F.uint8("mrc.neth.reason", "NACK reason", base.HEX, reasons),
    vendor = F.uint8("mrc.neth.vendor_info", "Vendor info", base.HEX),
    neth_entropy = F.uint32("mrc.neth.entropy", "Entropy (reflected EV)", base.HEX),
    neth_spdcid = F.uint16("mrc.neth.spdcid", "Source PDC id", base.DEC),
    neth_dpdcid = F.uint16("mrc.neth.dpdcid", "Destination PDC id", base.DEC),
    nack_psn = F.uint24("mrc.neth.nack_psn", "NACK PSN", base.DEC),
    neth_cc_type = F.uint8("mrc.neth.cc_type", "CC type", base.DEC, nil, 0xF0),
    neth_cc_flags = F.uint8("mrc.neth.cc_flags", "CC flags", base.HEX, nil, 0x0F),
    neth_ts = F.uint16("mrc.neth.timestamp", "Reflected TX timestamp", base.DEC),
    -- PETH, brief 2.11
    peth_type = F.uint16("mrc.peth.type", "Type", base.DEC, nil, 0xF000),
    peth_next = F.uint16("mrc.peth.next", "Next", base.DEC, nil, 0x0F80),
    peth_vendor = F.uint8("mrc.peth.vendor_info", "Vendor info", base.HEX),
    probe_id = F.uint16("mrc.peth.probe_id", "Probe id", base.DEC),
    peth_spdcid = F.uint16("mrc.peth.spdcid", "Source PDC id", base.DEC),
    peth_dpdcid = F.uint16("mrc.peth.dpdcid", "Destination PDC id", base.DEC),
    peth_ts = F.uint16("mrc.peth.timestamp", "TX timestamp", base.DEC),
    peth_tsr = F.bool("mrc.peth.tsr", "TSR", 16, nil, 0x8000),
    peth_fmt = F.uint16("mrc.peth.format", "Format type", base.DEC, nil, 0x000F),
    -- ERTH / EETH, brief 2.12
    erth_op = F.uint8("mrc.erth.op", "Endpoint op", base.DEC, ep_ops, 0xC0),
    erth_mask = F.uint32("mrc.erth.port_status_mask", "Port status mask", base.HEX),
    erth_ts = F.uint16("mrc.erth.timestamp", "TX timestamp", base.DEC),
    erth_tsr = F.bool("mrc.erth.tsr", "TSR", 16, nil, 0x8000),
    erth_fmt = F.uint16("mrc.erth.format", "Format type", base.DEC, nil, 0x000F),
    eeth_op = F.uint8("mrc.eeth.op", "Endpoint op", base.DEC, ep_ops, 0xC0),
    eeth_mask = F.uint32("mrc.eeth.port_status_mask", "Port status mask", base.HEX),
    eeth_ts = F.uint16("mrc.eeth.timestamp", "Reflected TX timestamp", base.DEC),
    eeth_tsr = F.bool("mrc.eeth.tsr", "TSR", 16, nil, 0x8000),
    eeth_fmt = F.uint16("mrc.eeth.format", "Format type", base.DEC, nil, 0x000F),
    eeth_svc = F.uint32("mrc.eeth.service_time", "Service time (ns)", base.DEC),
    -- trailer
    payload_len = F.uint32("mrc.payload_len", "Payload length", base.DEC),
    icrc = F.uint32("mrc.icrc", "ICRC (as a little-endian word)", base.HEX),
    trimmed = F.string("mrc.trimmed", "Trimmed"),
}
local list = {}
for _, v in pairs(f) do list[#list + 1] = v end
mrc.fields = list

local ef_truncated = ProtoExpert.new("mrc.truncated", "Header truncated",
    expert.group.MALFORMED, expert.severity.WARN)
local ef_trimmed = ProtoExpert.new("mrc.trimmed.expert", "Trimmed by a switch (DSCP)",
    expert.group.SEQUENCE, expert.severity.NOTE)
mrc.experts = { ef_truncated, ef_trimmed }

local dscp_field = Field.new("ipv6.tclass.dscp")

-- The outermost IPv6 DSCP of this frame, or nil.
local function outer_dscp()
    local all = { dscp_field() }
    if #all == 0 then return nil end
    return all[1].value
end

local function is_mrc_opcode(op)
    return opcodes[op] ~= nil
end

-- Add `len` bytes at `off` as a subtree named `name`, or flag truncation. Returns the subtree.
local function header(tvb, tree, off, len, name)
    if tvb:len() < off + len then
        local t = tree:add(mrc, tvb(off), name .. " (truncated)")
        t:add_proto_expert_info(ef_truncated)
        return nil
    end
    return tree:add(mrc, tvb(off, len), name)
end

local function dissect_timestamp_word(t, tvb, at, fts, ftsr, ffmt)
    t:add(fts, tvb(at, 2))
    t:add(ftsr, tvb(at + 2, 2))
    t:add(ffmt, tvb(at + 2, 2))
end

local stock -- the RoCEv2 dissector we replace on udp.port 4791

local function dissect_mrc(tvb, pinfo, root)
    local op = tvb(0, 1):uint()
    pinfo.cols.protocol = "MRC"
    local tree = root:add(mrc, tvb(), "MRC")
    local d = outer_dscp()
    local trimmed = d ~= nil and (d == mrc.prefs.dscp_trimmed or d == mrc.prefs.dscp_trimmed_lasthop)
    if trimmed then
        local which = (d == mrc.prefs.dscp_trimmed) and "in fabric" or "at last hop"
        tree:add(f.trimmed, which):add_proto_expert_info(ef_trimmed)
    end

    local t = header(tvb, tree, 0, 12, "Base Transport Header")
    if t == nil then return tvb:len() end
    t:add(f.opcode, tvb(0, 1))
    t:add(f.se, tvb(1, 1)); t:add(f.m, tvb(1, 1)); t:add(f.padcnt, tvb(1, 1)); t:add(f.tver, tvb(1, 1))
    t:add(f.pkey, tvb(2, 2)); t:add(f.resv8a, tvb(4, 1)); t:add(f.destqp, tvb(5, 3))
    t:add(f.ackreq, tvb(8, 1)); t:add(f.rtx, tvb(8, 1)); t:add(f.ts, tvb(8, 1))
    t:add(f.psn, tvb(9, 3))
    local pad = bit.rshift(bit.band(tvb(1, 1):uint(), 0x30), 4)
    local ts = bit.band(tvb(8, 1):uint(), 0x20) ~= 0
    local psn = tvb(9, 3):uint()
    local info = string.format("MRC %s QP=0x%06x PSN=%d", opcodes[op], tvb(5, 3):uint(), psn)
    local off = 12

    if op >= 0xC6 and op <= 0xCB then
        local h = header(tvb, tree, off, 4, "METH")
        if h == nil then goto done end
        h:add(f.rqmsn, tvb(off, 2)); h:add(f.msn, tvb(off + 2, 2))
        info = info .. string.format(" MSN=%d", tvb(off + 2, 2):uint())
        off = off + 4
        if ts then
            h = header(tvb, tree, off, 4, "TSETH")
            if h == nil then goto done end
            dissect_timestamp_word(h, tvb, off, f.tseth_ts, f.tseth_tsr, f.tseth_fmt)
            off = off + 4
        end
        h = header(tvb, tree, off, 16, "RETH")
        if h == nil then goto done end
        h:add(f.va, tvb(off, 8)); h:add(f.rkey, tvb(off + 8, 4)); h:add(f.dmalen, tvb(off + 12, 4))
        off = off + 16
        if op == 0xC9 or op == 0xCB then
            h = header(tvb, tree, off, 4, "ImmDt")
            if h == nil then goto done end
            h:add(f.imm, tvb(off, 4))
            off = off + 4
        end
    elseif op == 0xD1 then
        local h = header(tvb, tree, off, 4, "AETH")
        if h == nil then goto done end
        h:add(f.syndrome, tvb(off, 1)); h:add(f.aeth_msn, tvb(off + 1, 3))
        off = off + 4
    elseif op == 0xDC then
        local h = header(tvb, tree, off, 28, "SETH")
        if h == nil then goto done end
        h:add(f.seth_type, tvb(off, 2)); h:add(f.seth_next, tvb(off, 2))
        h:add(f.seth_m, tvb(off, 2)); h:add(f.seth_pr, tvb(off, 2))
        h:add(f.ack_psn_offset, tvb(off + 2, 2)); h:add(f.seth_entropy, tvb(off + 4, 4))
        h:add(f.seth_spdcid, tvb(off + 8, 2)); h:add(f.seth_dpdcid, tvb(off + 10, 2))
        h:add(f.cack_psn, tvb(off + 13, 3))
        h:add(f.seth_cc_type, tvb(off + 16, 1)); h:add(f.seth_cc_flags, tvb(off + 16, 1))
        h:add(f.mpr, tvb(off + 17, 1)); h:add(f.sack_offset, tvb(off + 18, 2))
        h:add(f.sack_bitmap, tvb(off + 20, 8))
        info = info .. string.format(" CACK=%d", tvb(off + 13, 3):uint())
        off = off + 28
        h = header(tvb, tree, off, 8, "CC_STATE")
        if h == nil then goto done end
        h:add(f.cc_ts, tvb(off, 2)); h:add(f.ooo, tvb(off + 2, 2))
        h:add(f.restore, tvb(off + 4, 1)); h:add(f.pen, tvb(off + 4, 1))
        h:add(f.rcvd, tvb(off + 5, 3))
        off = off + 8
    elseif op == 0xDD then
        local h = header(tvb, tree, off, 20, "NETH")
        if h == nil then goto done end
        h:add(f.neth_type, tvb(off, 2)); h:add(f.neth_next, tvb(off, 2))
        h:add(f.reason, tvb(off + 2, 1)); h:add(f.vendor, tvb(off + 3, 1))
        h:add(f.neth_entropy, tvb(off + 4, 4))
        h:add(f.neth_spdcid, tvb(off + 8, 2)); h:add(f.neth_dpdcid, tvb(off + 10, 2))
        h:add(f.nack_psn, tvb(off + 13, 3))
        h:add(f.neth_cc_type, tvb(off + 16, 1)); h:add(f.neth_cc_flags, tvb(off + 16, 1))
        h:add(f.neth_ts, tvb(off + 18, 2))
        info = info .. string.format(" %s NPSN=%d", reasons[tvb(off + 2, 1):uint()] or "?",
            tvb(off + 13, 3):uint())
        off = off + 20
    elseif op == 0xDE then
        local h = header(tvb, tree, off, 16, "PETH")
        if h == nil then goto done end
        h:add(f.peth_type, tvb(off, 2)); h:add(f.peth_next, tvb(off, 2))
        h:add(f.peth_vendor, tvb(off + 3, 1)); h:add(f.probe_id, tvb(off + 4, 2))
        h:add(f.peth_spdcid, tvb(off + 8, 2)); h:add(f.peth_dpdcid, tvb(off + 10, 2))
        dissect_timestamp_word(h, tvb, off + 12, f.peth_ts, f.peth_tsr, f.peth_fmt)
        off = off + 16
    elseif op == 0xD8 then
        local h = header(tvb, tree, off, 16, "ERTH")
        if h == nil then goto done end
        h:add(f.erth_op, tvb(off, 1)); h:add(f.erth_mask, tvb(off + 4, 4))
        dissect_timestamp_word(h, tvb, off + 12, f.erth_ts, f.erth_tsr, f.erth_fmt)
        off = off + 16
    elseif op == 0xD9 then
        local h = header(tvb, tree, off, 36, "EETH")
        if h == nil then goto done end
        h:add(f.eeth_op, tvb(off, 1)); h:add(f.eeth_mask, tvb(off + 4, 4))
        dissect_timestamp_word(h, tvb, off + 8, f.eeth_ts, f.eeth_tsr, f.eeth_fmt)
        h:add(f.eeth_svc, tvb(off + 12, 4))
        off = off + 36
    end

    if not trimmed and tvb:len() >= off + 4 + pad then
        local plen = tvb:len() - off - 4 - pad
        tree:add(f.payload_len, plen):set_generated()
        tree:add_le(f.icrc, tvb(tvb:len() - 4, 4))
    end
    ::done::
    if trimmed then info = info .. " [TRIMMED]" end
    pinfo.cols.info = info
    return tvb:len()
end

function mrc.dissector(tvb, pinfo, root)
    if tvb:len() < 1 then return 0 end
    if not is_mrc_opcode(tvb(0, 1):uint()) then
        if stock ~= nil then return stock:call(tvb, pinfo, root) end
        return 0
    end
    return dissect_mrc(tvb, pinfo, root)
end

local function heuristic(tvb, pinfo, root)
    if pinfo.dst_port ~= mrc.prefs.udp_port or tvb:len() < 12 then return false end
    if not is_mrc_opcode(tvb(0, 1):uint()) then return false end
    dissect_mrc(tvb, pinfo, root)
    return true
end

local udp_table = DissectorTable.get("udp.port")
stock = udp_table:get_dissector(4791)
udp_table:add(mrc.prefs.udp_port, mrc)
mrc:register_heuristic("udp", heuristic)
