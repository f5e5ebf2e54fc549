-- rnic_ddp_sctp.lua: Wireshark dissector for DDP over SCTP (RFC 5043) and the
-- RDMAP messages it carries (RFC 5041 DDP, RFC 5040 RDMAP, RFC 6581 enhanced
-- connection setup), shipped with the open RNIC project.
--
-- Registered in the "sctp.ppi" dissector table for
--   PPID 16  DDP Segment Chunk: DDP-SSN, DDP tagged/untagged header (RFC 5041 4),
--            RDMAP control field, Invalidate STag, Read Request, Terminate (RFC 5040 4)
--   PPID 17  DDP Stream Session Control: DDP-SSN, function code (RFC 5043 5.2.3),
--            RFC 6581 9 enhanced data (A, B, IRD, C, D, ORD), private data
--
-- It decodes and checks exactly what `rnic dissect` (sim/commands/dissect.py)
-- decodes and checks, stopping where it stops, and marks the same errors with
-- expert info: U=0 or SCTP fragmentation of a DDP chunk (RFC 5043 9, 10), DV or
-- RV not 1, undefined opcode or opcode on the wrong buffer model or queue, bad
-- lengths, session control rules.  The tests (tests/interop/test_wireshark_lua.py)
-- hold its fields equal to `rnic dissect --json`'s.
--
-- Why not hand the segment to Wireshark's own iwarp_ddp_rdmap dissector: it is
-- not registered for SCTP PPIDs, it shows the Terminate's DDP and RDMA headers
-- as opaque bytes, and it does not make the checks above; decoding here keeps
-- one set of field names (rnic_ddp.*) that match the project's dissector.
--
-- Install: copy into the personal Lua plugins folder (Help > About Wireshark >
-- Folders, e.g. ~/.local/lib/wireshark/plugins/) or load it for one run:
--   tshark -X lua_script:scripts/wireshark/rnic_ddp_sctp.lua -r capture.pcap

local P = Proto("rnic_ddp", "DDP over SCTP / RDMAP (rnic)")

local PPID_DDP_SEGMENT = 16
local PPID_DDP_SESSION_CONTROL = 17
local MAX_PRIVATE_DATA = 512          -- RFC 5043 5.2.3
local READ_REQUEST_LENGTH = 28        -- RFC 5040 4.4

local FUNCTIONS = {
    [1] = "Initiate", [2] = "Accept", [3] = "Reject", [4] = "Terminate",
    [5] = "Enhanced Initiate", [6] = "Enhanced Accept", [7] = "Enhanced Reject",
}
local OPCODES = {
    [0] = "RDMA Write", [1] = "RDMA Read Request", [2] = "RDMA Read Response", [3] = "Send",
    [4] = "Send with Invalidate", [5] = "Send with SE", [6] = "Send with SE and Invalidate",
    [7] = "Terminate",
}
local TERMINATE_LAYERS = { [0] = "RDMAP", [1] = "DDP", [2] = "LLP" }

-- RFC 5040 4.2: the buffer model and untagged queue of each opcode.
local OPCODE_TAGGED = { [0] = true, [2] = true }
local OPCODE_QUEUE = { [1] = 1, [3] = 0, [4] = 0, [5] = 0, [6] = 0, [7] = 2 }

local f = {
    ssn = ProtoField.uint16("rnic_ddp.ssn", "DDP-SSN"),
    -- session control (PPID 17)
    func = ProtoField.uint16("rnic_ddp.session.function", "Function code", base.DEC, FUNCTIONS),
    peer_to_peer = ProtoField.bool("rnic_ddp.session.peer_to_peer", "Peer-to-peer (A)"),
    send_rtr = ProtoField.bool("rnic_ddp.session.send_rtr", "Zero-length Send RTR (B)"),
    ird = ProtoField.uint16("rnic_ddp.session.ird", "IRD", base.DEC, nil, 0x3FFF),
    write_rtr = ProtoField.bool("rnic_ddp.session.write_rtr", "Zero-length RDMA Write RTR (C)"),
    read_rtr = ProtoField.bool("rnic_ddp.session.read_rtr", "Zero-length RDMA Read RTR (D)"),
    ord = ProtoField.uint16("rnic_ddp.session.ord", "ORD", base.DEC, nil, 0x3FFF),
    private_data = ProtoField.bytes("rnic_ddp.session.private_data", "Private data"),
    -- DDP header (PPID 16)
    tagged = ProtoField.bool("rnic_ddp.tagged", "Tagged (T)", 8, nil, 0x80),
    last = ProtoField.bool("rnic_ddp.last", "Last (L)", 8, nil, 0x40),
    rsvd = ProtoField.uint8("rnic_ddp.rsvd", "Reserved", base.HEX, nil, 0x3C),
    dv = ProtoField.uint8("rnic_ddp.dv", "DDP version (DV)", base.DEC, nil, 0x03),
    stag = ProtoField.uint32("rnic_ddp.stag", "STag", base.HEX),
    to = ProtoField.uint64("rnic_ddp.to", "Tagged offset (TO)", base.HEX),
    qn = ProtoField.uint32("rnic_ddp.qn", "Queue number (QN)"),
    msn = ProtoField.uint32("rnic_ddp.msn", "Message sequence number (MSN)"),
    mo = ProtoField.uint32("rnic_ddp.mo", "Message offset (MO)"),
    payload_length = ProtoField.uint32("rnic_ddp.payload_length", "Payload length"),
    payload = ProtoField.bytes("rnic_ddp.payload", "Payload"),
    -- RDMAP (RFC 5040 4)
    rv = ProtoField.uint8("rnic_ddp.rdmap.rv", "RDMAP version (RV)", base.DEC, nil, 0xC0),
    rdmap_rsvd = ProtoField.uint8("rnic_ddp.rdmap.rsvd", "Reserved", base.HEX, nil, 0x30),
    opcode = ProtoField.uint8("rnic_ddp.rdmap.opcode", "Opcode", base.DEC, OPCODES, 0x0F),
    invalidate_stag = ProtoField.uint32("rnic_ddp.rdmap.invalidate_stag", "Invalidate STag", base.HEX),
    sink_stag = ProtoField.uint32("rnic_ddp.rdmap.sink_stag", "Data Sink STag", base.HEX),
    sink_to = ProtoField.uint64("rnic_ddp.rdmap.sink_to", "Data Sink Tagged Offset", base.HEX),
    size = ProtoField.uint32("rnic_ddp.rdmap.size", "RDMA Read Message Size"),
    source_stag = ProtoField.uint32("rnic_ddp.rdmap.source_stag", "Data Source STag", base.HEX),
    source_to = ProtoField.uint64("rnic_ddp.rdmap.source_to", "Data Source Tagged Offset", base.HEX),
    -- Terminate (RFC 5040 4.8)
    term_layer = ProtoField.uint32("rnic_ddp.rdmap.term.layer", "Layer", base.DEC, TERMINATE_LAYERS, 0xF0000000),
    term_etype = ProtoField.uint32("rnic_ddp.rdmap.term.etype", "Error type", base.DEC, nil, 0x0F000000),
    term_code = ProtoField.uint32("rnic_ddp.rdmap.term.code", "Error code", base.HEX, nil, 0x00FF0000),
    term_m = ProtoField.bool("rnic_ddp.rdmap.term.m", "DDP Segment Length valid (M)", 32, nil, 0x00008000),
    term_d = ProtoField.bool("rnic_ddp.rdmap.term.d", "DDP header included (D)", 32, nil, 0x00004000),
    term_r = ProtoField.bool("rnic_ddp.rdmap.term.r", "RDMA header included (R)", 32, nil, 0x00002000),
    term_reserved = ProtoField.uint32("rnic_ddp.rdmap.term.reserved", "Reserved", base.HEX, nil, 0x00001FFF),
    term_segment_length = ProtoField.uint16("rnic_ddp.rdmap.term.segment_length", "DDP Segment Length"),
    term_ddp_tagged = ProtoField.bool("rnic_ddp.rdmap.term.ddp.tagged", "Tagged (T)", 8, nil, 0x80),
    term_ddp_last = ProtoField.bool("rnic_ddp.rdmap.term.ddp.last", "Last (L)", 8, nil, 0x40),
    term_ddp_rsvd = ProtoField.uint8("rnic_ddp.rdmap.term.ddp.rsvd", "Reserved", base.HEX, nil, 0x3C),
    term_ddp_dv = ProtoField.uint8("rnic_ddp.rdmap.term.ddp.dv", "DDP version (DV)", base.DEC, nil, 0x03),
    term_ddp_rsvd_ulp = ProtoField.uint64("rnic_ddp.rdmap.term.ddp.rsvd_ulp", "RsvdULP", base.HEX),
    term_ddp_stag = ProtoField.uint32("rnic_ddp.rdmap.term.ddp.stag", "STag", base.HEX),
    term_ddp_to = ProtoField.uint64("rnic_ddp.rdmap.term.ddp.to", "Tagged offset (TO)", base.HEX),
    term_ddp_qn = ProtoField.uint32("rnic_ddp.rdmap.term.ddp.qn", "Queue number (QN)"),
    term_ddp_msn = ProtoField.uint32("rnic_ddp.rdmap.term.ddp.msn", "Message sequence number (MSN)"),
    term_ddp_mo = ProtoField.uint32("rnic_ddp.rdmap.term.ddp.mo", "Message offset (MO)"),
    term_rr_sink_stag = ProtoField.uint32("rnic_ddp.rdmap.term.rr.sink_stag", "Data Sink STag", base.HEX),
    term_rr_sink_to = ProtoField.uint64("rnic_ddp.rdmap.term.rr.sink_to", "Data Sink Tagged Offset", base.HEX),
    term_rr_size = ProtoField.uint32("rnic_ddp.rdmap.term.rr.size", "RDMA Read Message Size"),
    term_rr_source_stag = ProtoField.uint32("rnic_ddp.rdmap.term.rr.source_stag", "Data Source STag", base.HEX),
    term_rr_source_to = ProtoField.uint64("rnic_ddp.rdmap.term.rr.source_to", "Data Source Tagged Offset", base.HEX),
}
local field_list = {}
for _, field in pairs(f) do field_list[#field_list + 1] = field end
P.fields = field_list

local e = {
    unordered = ProtoExpert.new("rnic_ddp.expert.unordered", "DDP chunk with U=0 (RFC 5043 10 requires U=1)",
        expert.group.PROTOCOL, expert.severity.ERROR),
    fragmented = ProtoExpert.new("rnic_ddp.expert.fragmented", "Fragmented DDP chunk (RFC 5043 9)",
        expert.group.PROTOCOL, expert.severity.ERROR),
    dv = ProtoExpert.new("rnic_ddp.expert.dv", "DDP version is not 1 (RFC 5041 4.1)",
        expert.group.PROTOCOL, expert.severity.ERROR),
    rv = ProtoExpert.new("rnic_ddp.expert.rv", "RDMAP version is not 1 (RFC 5040 4.1)",
        expert.group.PROTOCOL, expert.severity.ERROR),
    opcode = ProtoExpert.new("rnic_ddp.expert.opcode",
        "RDMAP opcode undefined, or on the wrong buffer model or queue (RFC 5040 4.2)",
        expert.group.PROTOCOL, expert.severity.ERROR),
    length = ProtoExpert.new("rnic_ddp.expert.length", "Bad length", expert.group.MALFORMED, expert.severity.ERROR),
    session = ProtoExpert.new("rnic_ddp.expert.session",
        "Session control message breaks RFC 5043 5.2.3 / RFC 6581 7",
        expert.group.PROTOCOL, expert.severity.ERROR),
}
P.experts = { e.unordered, e.fragmented, e.dv, e.rv, e.opcode, e.length, e.session }

-- The DATA chunk's flags (U, B, E) and PPID: the SCTP dissector's own fields.
-- It adds each DATA chunk's header to the tree before it hands the chunk's user
-- data on, so the last value of each is this chunk's, also when several chunks
-- are bundled and when it hands on a message it reassembled from fragments.
local data_u_bit = Field.new("sctp.data_u_bit")
local data_b_bit = Field.new("sctp.data_b_bit")
local data_e_bit = Field.new("sctp.data_e_bit")
local data_ppid = Field.new("sctp.data_payload_proto_id")

local function current(extractor)
    local values = { extractor() }
    local last = values[#values]
    if last == nil then return nil end
    return last.value
end

local function u8(tvb, offset) return tvb(offset, 1):uint() end
local function bits(value, shift, width) return math.floor(value / 2 ^ shift) % 2 ^ width end

-- A length check: true when `count` bytes from `offset` were captured.  Missing
-- bytes that the snap length cut are not an error (Wireshark marks the cut);
-- missing bytes that were never sent are.
local function need(tvb, offset, count, item, what)
    if tvb:len() - offset >= count then return true end
    if tvb:reported_len() - offset >= count then
        item:append_text(" [cut by the capture's snap length]")
    else
        item:add_proto_expert_info(e.length, string.format("%s needs %d bytes, only %d left",
            what, count, math.max(tvb:reported_len() - offset, 0)))
    end
    return false
end

local function dissect_session(tvb, pinfo, tree)
    tree:set_text("DDP Stream Session Control (RFC 5043 5.2.3)")
    if not need(tvb, 0, 4, tree, "session control header") then return end
    tree:add(f.ssn, tvb(0, 2))
    local code = tvb(2, 2):uint()
    local item = tree:add(f.func, tvb(2, 2))
    local name = FUNCTIONS[code]
    if name == nil then
        item:add_proto_expert_info(e.session, string.format("unknown function code 0x%03x", code))
        return
    end
    pinfo.cols.info:append(string.format("DDP-SSN %d Session %s ", tvb(0, 2):uint(), name))
    local private = tvb:reported_len() - 4
    local enhanced = code >= 5
    if private > MAX_PRIVATE_DATA then
        item:add_proto_expert_info(e.session, string.format(
            "RFC 5043 5.2.3: %d bytes of private data exceed %d", private, MAX_PRIVATE_DATA))
        return
    end
    if code == 4 and private > 0 then
        item:add_proto_expert_info(e.session, "RFC 5043 5.2.3: Private Data MUST NOT be included in Terminate")
        return
    end
    if enhanced and private < 4 then
        item:add_proto_expert_info(e.session, "RFC 6581 7/9: enhanced message without its 4 bytes of enhanced data")
        return
    end
    local ulp = 4
    if enhanced then
        if not need(tvb, 4, 4, tree, "enhanced data") then return end
        -- RFC 6581 9: A B IRD(14) C D ORD(14); with A=0 the receiver ignores B, C and D.
        local ird_word, ord_word = tvb(4, 2):uint(), tvb(6, 2):uint()
        local a = bits(ird_word, 15, 1) == 1
        local sub = tree:add(tvb(4, 4), "Enhanced RDMA connection establishment data (RFC 6581 9)")
        sub:add(f.peer_to_peer, tvb(4, 2), a)
        sub:add(f.send_rtr, tvb(4, 2), a and bits(ird_word, 14, 1) == 1)
        sub:add(f.ird, tvb(4, 2))
        sub:add(f.write_rtr, tvb(6, 2), a and bits(ord_word, 15, 1) == 1)
        sub:add(f.read_rtr, tvb(6, 2), a and bits(ord_word, 14, 1) == 1)
        sub:add(f.ord, tvb(6, 2))
        ulp = 8
    end
    if tvb:reported_len() > ulp and tvb:len() > ulp then
        tree:add(f.private_data, tvb(ulp))
    end
end

local function add_read_request(tree, tvb, offset, names)
    tree:add(names[1], tvb(offset, 4))
    tree:add(names[2], tvb(offset + 4, 8))
    tree:add(names[3], tvb(offset + 12, 4))
    tree:add(names[4], tvb(offset + 16, 4))
    tree:add(names[5], tvb(offset + 20, 8))
end

-- Terminate body, RFC 5040 4.8 (layout as model/rdmap/messages.py decodes it).
local function dissect_terminate(tvb, offset, tree)
    local sub = tree:add(tvb(offset), "Terminate")
    if not need(tvb, offset, 4, sub, "Terminate Control") then return end
    local control = tvb(offset, 4)
    for _, field in ipairs({ f.term_layer, f.term_etype, f.term_code, f.term_m, f.term_d, f.term_r,
                             f.term_reserved }) do
        sub:add(field, control)
    end
    local word = control:uint()
    local m, d, r = bits(word, 15, 1) == 1, bits(word, 14, 1) == 1, bits(word, 13, 1) == 1
    local at = offset + 4
    if m or d then
        if not need(tvb, at, 2, sub, "Terminate DDP Segment Length") then return end
        if m then
            sub:add(f.term_segment_length, tvb(at, 2))
        else
            sub:add(tvb(at, 2), "DDP Segment Length (M=0: not valid)")
        end
        at = at + 2
    end
    if d then
        if not need(tvb, at, 1, sub, "terminated DDP header") then return end
        local tagged = bits(u8(tvb, at), 7, 1) == 1
        local length = tagged and 14 or 18
        if not need(tvb, at, length, sub, "terminated DDP header") then return end
        local h = sub:add(tvb(at, length), "Terminated DDP header")
        h:add(f.term_ddp_tagged, tvb(at, 1))
        h:add(f.term_ddp_last, tvb(at, 1))
        h:add(f.term_ddp_rsvd, tvb(at, 1))
        h:add(f.term_ddp_dv, tvb(at, 1))
        if tagged then
            h:add(f.term_ddp_rsvd_ulp, tvb(at + 1, 1), tvb(at + 1, 1):uint64())
            h:add(f.term_ddp_stag, tvb(at + 2, 4))
            h:add(f.term_ddp_to, tvb(at + 6, 8))
        else
            h:add(f.term_ddp_rsvd_ulp, tvb(at + 1, 5), tvb(at + 1, 5):uint64())
            h:add(f.term_ddp_qn, tvb(at + 6, 4))
            h:add(f.term_ddp_msn, tvb(at + 10, 4))
            h:add(f.term_ddp_mo, tvb(at + 14, 4))
        end
        at = at + length
    end
    if r then
        if not need(tvb, at, READ_REQUEST_LENGTH, sub, "terminated RDMA header") then return end
        local h = sub:add(tvb(at, READ_REQUEST_LENGTH), "Terminated RDMA header (Read Request)")
        add_read_request(h, tvb, at, { f.term_rr_sink_stag, f.term_rr_sink_to, f.term_rr_size,
                                       f.term_rr_source_stag, f.term_rr_source_to })
        at = at + READ_REQUEST_LENGTH
    end
    if tvb:len() > at then
        sub:add_proto_expert_info(e.length, string.format("%d bytes after the Terminate header", tvb:len() - at))
    end
end

local function dissect_segment(tvb, pinfo, tree)
    tree:set_text("DDP Segment (RFC 5043 5.2.2, RFC 5041 4)")
    if not need(tvb, 0, 2, tree, "DDP-SSN") then return end
    tree:add(f.ssn, tvb(0, 2))
    if not need(tvb, 2, 1, tree, "DDP Control Field") then return end
    local control = u8(tvb, 2)
    local tagged = bits(control, 7, 1) == 1
    local length = tagged and 14 or 18
    if not need(tvb, 2, length, tree, (tagged and "tagged" or "untagged") .. " DDP header") then return end
    local header = tree:add(tvb(2, length), tagged and "DDP tagged header" or "DDP untagged header")
    header:add(f.tagged, tvb(2, 1))
    header:add(f.last, tvb(2, 1))
    header:add(f.rsvd, tvb(2, 1))
    local dv_item = header:add(f.dv, tvb(2, 1))
    local rdmap = header:add(tvb(3, 1), "RDMAP control field (RFC 5040 4.1)")
    local qn
    local info = string.format("DDP-SSN %d", tvb(0, 2):uint())
    if tagged then
        header:add(f.stag, tvb(4, 4))
        header:add(f.to, tvb(8, 8))
        info = info .. string.format(" STag 0x%x TO 0x%s", tvb(4, 4):uint(), tvb(8, 8):uint64():tohex():gsub("^0+(.)", "%1"))
    else
        qn = tvb(8, 4):uint()
        header:add(f.qn, tvb(8, 4))
        header:add(f.msn, tvb(12, 4))
        header:add(f.mo, tvb(16, 4))
        info = info .. string.format(" QN %d MSN %d MO %d", qn, tvb(12, 4):uint(), tvb(16, 4):uint())
    end
    local payload_at = 2 + length
    tree:add(f.payload_length, tvb:reported_len() - payload_at):set_generated()
    if tvb:len() > payload_at then tree:add(f.payload, tvb(payload_at)) end
    if bits(control, 0, 2) ~= 1 then
        dv_item:add_proto_expert_info(e.dv, string.format("DDP version %d is not 1 (RFC 5041 4.1)", bits(control, 0, 2)))
        pinfo.cols.info:append(info .. " ")
        return
    end
    -- RDMAP (RFC 5040 4.1): RV, Rsvd and Opcode in the first RsvdULP byte.
    local rdmap_control = u8(tvb, 3)
    rdmap:add(f.rv, tvb(3, 1))
    rdmap:add(f.rdmap_rsvd, tvb(3, 1))
    local op_item = rdmap:add(f.opcode, tvb(3, 1))
    local opcode, rv = bits(rdmap_control, 0, 4), bits(rdmap_control, 6, 2)
    pinfo.cols.info:append((OPCODES[opcode] or string.format("opcode %d", opcode)) .. " " .. info .. " ")
    if rv ~= 1 then
        rdmap:add_proto_expert_info(e.rv, string.format("RDMAP version %d is not 1 (RFC 5040 4.1)", rv))
        return
    end
    if OPCODES[opcode] == nil then
        op_item:add_proto_expert_info(e.opcode, string.format("undefined RDMAP opcode %d (RFC 5040 4.2)", opcode))
        return
    end
    if (OPCODE_TAGGED[opcode] or false) ~= tagged then
        op_item:add_proto_expert_info(e.opcode, string.format("%s must use the %s buffer model (RFC 5040 4.2)",
            OPCODES[opcode], OPCODE_TAGGED[opcode] and "tagged" or "untagged"))
        return
    end
    if not tagged and qn ~= OPCODE_QUEUE[opcode] then
        op_item:add_proto_expert_info(e.opcode, string.format("%s on QN %d, expected %d (RFC 5040 4.2)",
            OPCODES[opcode], qn, OPCODE_QUEUE[opcode]))
        return
    end
    if opcode == 4 or opcode == 6 then
        rdmap:add(f.invalidate_stag, tvb(4, 4))
    end
    if opcode == 1 then
        local available = tvb:reported_len() - payload_at
        if available ~= READ_REQUEST_LENGTH then
            local message = available < READ_REQUEST_LENGTH
                and string.format("RDMA Read Request header needs 28 bytes, only %d left", available)
                or string.format("RDMA Read Request is %d bytes, expected 28", available)
            tree:add_proto_expert_info(e.length, message)
            return
        end
        if not need(tvb, payload_at, READ_REQUEST_LENGTH, tree, "RDMA Read Request header") then return end
        local sub = tree:add(tvb(payload_at, READ_REQUEST_LENGTH), "RDMA Read Request (RFC 5040 4.4)")
        add_read_request(sub, tvb, payload_at, { f.sink_stag, f.sink_to, f.size, f.source_stag, f.source_to })
    elseif opcode == 7 then
        if tvb:len() > payload_at or tvb:reported_len() > payload_at then
            dissect_terminate(tvb, payload_at, tree)
        else
            tree:add_proto_expert_info(e.length, "Terminate Control needs 4 bytes, only 0 left")
        end
    end
end

function P.dissector(tvb, pinfo, tree)
    local ppid = current(data_ppid)
    if ppid ~= PPID_DDP_SEGMENT and ppid ~= PPID_DDP_SESSION_CONTROL then return 0 end
    pinfo.cols.protocol:set("DDP/RDMAP")
    local root = tree:add(P, tvb())
    -- RFC 5043 10: U=1 on every DDP chunk; RFC 5043 9: no SCTP fragmentation (Wireshark
    -- hands on the reassembled message, with the last fragment's flags: B=0).
    if current(data_u_bit) == false then
        root:add_proto_expert_info(e.unordered)
    end
    if current(data_b_bit) == false or current(data_e_bit) == false then
        root:add_proto_expert_info(e.fragmented)
    end
    if ppid == PPID_DDP_SESSION_CONTROL then
        dissect_session(tvb, pinfo, root)
    else
        dissect_segment(tvb, pinfo, root)
    end
    return tvb:len()
end

local ppi = DissectorTable.get("sctp.ppi")
ppi:add(PPID_DDP_SEGMENT, P)
ppi:add(PPID_DDP_SESSION_CONTROL, P)
